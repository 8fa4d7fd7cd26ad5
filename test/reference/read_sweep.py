"""Reads a sweep index (sweep.h5) with h5py and prints it as JSON: root
attributes and every dataset as lists (strings decoded). Used by the sweep
tests to check the index from Python's side.

    python read_sweep.py SWEEP.h5
"""
import json
import sys

import h5py
import numpy as np


def plain(v):
    # Strings: fixed-length UTF-8 (numpy bytes, NULs stripped) or, in older files, variable-length.
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray):
        return [plain(x) for x in v] if v.dtype.kind in "OS" else v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


out = {"attrs": {}, "datasets": {}}
with h5py.File(sys.argv[1], "r") as f:
    for k, v in f.attrs.items():
        out["attrs"][k] = plain(v)

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            v = obj[()]
            out["datasets"][name] = [x if not isinstance(x, float) or np.isfinite(x) else None for x in plain(v)] \
                if isinstance(plain(v), list) and v.ndim == 1 else plain(v)

    f.visititems(visit)
print(json.dumps(out))
