"""Reads a Prism run store (run.h5) with h5py, the way a user's notebook would.

  run_store_reader.py dump PATH
      Opens PATH with SWMR (works live, after a kill, and when finished) and
      prints its attributes and every dataset as JSON; also says whether a plain
      (non-SWMR) open works.
  run_store_reader.py follow PATH SIGNAL TRAIN_ROWS
      Polls PATH while a test writes it (rows follow the formulas in
      test/store/test_run_store.cpp). Every poll must see a consistent prefix of
      rows; after seeing live rows it creates SIGNAL so the writer goes on; it
      ends when the run is completed and a plain open works. Prints a JSON summary;
      exits 1 on any inconsistency.
"""
import json
import math
import os
import sys
import time

import h5py
import numpy as np


def open_live(path):
    # The one form that reads a run.h5 live, after a crash, or finished.
    return h5py.File(path, "r", swmr=True)


def plain_open_error(path):
    try:
        with h5py.File(path, "r"):
            return None
    except OSError as e:
        return str(e)


def to_json(value):
    if isinstance(value, np.ndarray):
        return [to_json(v) for v in value.tolist()] if value.ndim else to_json(value.item())
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return to_json(float(value))
    if isinstance(value, bytes):  # a fixed-length UTF-8 string (numpy bytes, NULs stripped)
        return value.decode("utf-8")
    return value


def string_type(attrs, name):
    """How a string attribute is stored: 'fixed utf-8 nullpad 9', 'variable utf-8', ...; None for other types."""
    t = attrs.get_id(name).get_type()
    if not isinstance(t, h5py.h5t.TypeStringID):
        return None
    cset = {h5py.h5t.CSET_UTF8: "utf-8", h5py.h5t.CSET_ASCII: "ascii"}.get(t.get_cset(), str(t.get_cset()))
    if t.is_variable_str():
        return f"variable {cset}"
    pad = {h5py.h5t.STR_NULLPAD: "nullpad", h5py.h5t.STR_NULLTERM: "nullterm",
           h5py.h5t.STR_SPACEPAD: "spacepad"}[t.get_strpad()]
    return f"fixed {cset} {pad} {t.get_size()}"


def dump(path):
    out = {"datasets": {}, "groups": []}
    with open_live(path) as f:
        out["attrs"] = {k: to_json(f.attrs[k]) for k in f.attrs}
        out["attr_types"] = {k: type(f.attrs[k]).__name__ + ":" + str(getattr(f.attrs[k], "dtype", ""))
                             for k in f.attrs}
        out["attr_string_types"] = {k: string_type(f.attrs, k) for k in f.attrs if string_type(f.attrs, k)}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out["datasets"][name] = {
                    "string_type": None if obj.dtype.kind not in "OS" else
                    f"{'variable' if obj.dtype.kind == 'O' else 'fixed'} {obj.id.get_type().get_size()}",
                    "shape": list(obj.shape),
                    "maxshape": list(obj.maxshape) if obj.maxshape is not None else None,
                    "chunks": list(obj.chunks) if obj.chunks else None,
                    "dtype": str(obj.dtype),
                    "data": to_json(obj[()]),
                }
            else:
                out["groups"].append(name)

        f.visititems(visit)
    out["plain_open_error"] = plain_open_error(path)
    print(json.dumps(out))


# The rows the C++ test writes; exact in binary floating point on both sides.
def train_row(i):
    step = 3 * i
    return {"step": step, "tokens": 4096 * (step + 1), "loss": 11.0 / (step + 1),
            "lr": 1e-4 * (step % 7 + 1), "grad_norm": step * 0.25, "time_s": step * 0.125}


def val_row(j):
    step = 30 * j
    return {"step": step, "tokens": 4096 * (step + 1), "loss": 12.0 / (step + 1), "loss_se": 0.5 / (step + 1)}


def head_distance(step, layer, head):
    return (step + 1) * (layer + 1) + head * 0.5


class Inconsistent(Exception):
    pass


def check_prefix(f, group, expected_row):
    """Rows [0, len(step)) must be complete in every column of `group`."""
    n = len(f[group + "/step"])
    for column, value in expected_row(0).items():
        data = f[group + "/" + column][()]
        if len(data) < n:
            raise Inconsistent(f"/{group}/{column} has {len(data)} rows, /{group}/step has {n}")
        want = np.array([expected_row(i)[column] for i in range(n)], dtype=data.dtype)
        if not np.array_equal(data[:n], want):
            bad = int(np.nonzero(data[:n] != want)[0][0])
            raise Inconsistent(f"/{group}/{column}[{bad}] = {data[bad]}, expected {want[bad]}")
    return n


def check_attention(f, heads):
    n = len(f["attention/step"])
    steps = f["attention/step"][()]
    if not np.array_equal(steps[:n], 60 * np.arange(n)):
        raise Inconsistent(f"/attention/step = {steps[:n]}")
    layer_means = f["attention/distance"][()]
    if layer_means.shape[0] < n or layer_means.shape[1] != len(heads):
        raise Inconsistent(f"/attention/distance has shape {layer_means.shape}")
    for layer, h in enumerate(heads):
        per_head = f[f"attention/layer_{layer:02d}/distance"][()]
        if per_head.shape[0] < n or per_head.shape[1] != h:
            raise Inconsistent(f"/attention/layer_{layer:02d}/distance has shape {per_head.shape}")
        for k in range(n):
            want = np.array([head_distance(int(steps[k]), layer, j) for j in range(h)])
            if not np.array_equal(per_head[k], want):
                raise Inconsistent(f"layer {layer} row {k}: {per_head[k]} != {want}")
            if layer_means[k, layer] != np.mean(per_head[k]):
                raise Inconsistent(f"D_{layer} row {k}: {layer_means[k, layer]} != mean {np.mean(per_head[k])}")
    return n


def follow(path, signal, train_rows):
    deadline = time.monotonic() + 120
    polls, retries, live_counts, signalled = 0, 0, set(), False
    summary = None
    while time.monotonic() < deadline:
        try:
            with open_live(path) as f:
                status = to_json(f.attrs["status"])
                heads = [int(h) for h in f.attrs["heads"]]
                n_train = check_prefix(f, "train", train_row)
                n_val = check_prefix(f, "val", val_row)
                n_att = check_attention(f, heads)
                evals = {t: {k: to_json(f[f"eval/{t}/{k}"][()]) for k in ("acc", "acc_norm", "n")}
                         for t in f["eval"]}
        except (OSError, KeyError, RuntimeError):
            # Not created yet, or the writer is briefly out of SWMR mode (status/eval edit).
            retries += 1
            time.sleep(0.005)
            continue
        except Inconsistent as e:
            print(json.dumps({"error": str(e), "polls": polls}))
            return 1
        polls += 1
        if status == "running":
            live_counts.add(n_train)
            if n_train > 0 and not signalled:
                open(signal, "w").close()
                signalled = True
        if status == "completed":
            summary = {"train_rows": n_train, "val_rows": n_val, "attention_rows": n_att, "eval": evals}
            break
        time.sleep(0.002)
    if summary is None:
        print(json.dumps({"error": "the run did not complete within 120 s", "polls": polls}))
        return 1
    # The writer closes right after the final status; then a plain open must work.
    plain_error = plain_open_error(path)
    while plain_error and time.monotonic() < deadline:
        time.sleep(0.01)
        plain_error = plain_open_error(path)
    summary.update({"polls": polls, "retries": retries, "live_counts": sorted(live_counts),
                    "signalled": signalled, "plain_open_error": plain_error,
                    "expected_train_rows": train_rows})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif sys.argv[1] == "follow":
        sys.exit(follow(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
