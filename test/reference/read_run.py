"""Reads a run.h5 with h5py and prints it as JSON: root attributes and every
dataset (as lists). Used by tests to check the run store from Python's side.

    python read_run.py RUN.h5
"""
import json
import math
import sys

import h5py
import numpy as np


def plain(v):
    """JSON-ready: NaN (unknown, e.g. unigram_val_loss) becomes null, which JSON can carry."""
    if isinstance(v, bytes):  # a fixed-length UTF-8 string (numpy bytes, NULs stripped)
        return v.decode("utf-8")
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    if isinstance(v, np.generic):
        return plain(v.item())
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


out = {"attrs": {}, "datasets": {}}
with h5py.File(sys.argv[1], "r", swmr=True) as f:
    for k, v in f.attrs.items():
        out["attrs"][k] = plain(v)

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out["datasets"][name] = plain(obj[()])

    f.visititems(visit)
print(json.dumps(out))
