"""Turns run.h5 files into ones written before /val/loss_se, the root attribute
unigram_val_loss and the position-normalised distance existed (removes them), so
tests can check that readers and the report tolerate their absence and that
RunStore::open adds the column.

    python make_old_run.py RUN.h5...
"""
import sys

import h5py

for path in sys.argv[1:]:
    with h5py.File(path, "r+") as f:
        del f["val/loss_se"]
        del f.attrs["unigram_val_loss"]
        normalized = []
        f.visit(lambda name: normalized.append(name) if "normalized" in name.rsplit("/", 1)[-1] else None)
        for name in sorted(normalized, key=len, reverse=True):
            if name in f:
                del f[name]
