"""Prints a run.h5 as JSON the strict way (NaN and infinities become null),
read with h5py in SWMR mode: root attributes, every dataset (as lists), and the
attributes of every group.

    h5_json.py RUN.h5
"""
import json
import math
import sys

import h5py
import numpy as np


def plain(v):
    if isinstance(v, bytes):  # a fixed-length UTF-8 string (numpy bytes, NULs stripped)
        return v.decode("utf-8")
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    if isinstance(v, np.generic):
        return plain(v.item())
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


out = {"attrs": {}, "datasets": {}, "group_attrs": {}}
with h5py.File(sys.argv[1], "r", swmr=True) as f:
    out["attrs"] = {k: plain(v) for k, v in f.attrs.items()}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out["datasets"][name] = plain(obj[()])
        else:
            out["group_attrs"][name] = {k: plain(v) for k, v in obj.attrs.items()}

    f.visititems(visit)
print(json.dumps(out, allow_nan=False))
