"""`prism train` for the device-check rehearsal (test/scripts/stubs/prism): just what
scripts/device-check.sh's stage bodies read back: run.h5's /train columns (the same
curve whether resumed or not), config.yaml, checkpoints/latest and a
model.safetensors header with GPT-2 124M-like shapes."""
import json
import os
import struct
import sys

import h5py

args = sys.argv[1:]


def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default


def override(key, default):
    for a in args:
        if a.startswith(key + "="):
            return a.split("=", 1)[1]
    return default


if args[0] == "train":
    run = opt("--resume") or opt("--out")
    steps = int(override("train.max_steps", "10"))
    every = int(override("train.checkpoint_every", "10")) or steps  # 0: only at the end
    os.makedirs(run, exist_ok=True)
    if not os.path.exists(os.path.join(run, "config.yaml")):
        open(os.path.join(run, "config.yaml"), "w").write("train:\n  seq_len: 1024\n")
    with h5py.File(os.path.join(run, "run.h5"), "w") as f:  # the same curve whether resumed or not
        s = list(range(1, steps + 1))
        f["train/step"], f["train/loss"] = s, [10.0 - 0.1 * i for i in s]
        f["train/tokens"], f["train/time_s"] = [8192 * i for i in s], [0.05 * i for i in s]
    shapes = {"wte.weight": [50257, 768], "wpe.weight": [1024, 768]}
    for layer in range(12):
        shapes[f"h.{layer}.attn.c_attn.weight"] = [2304, 768]
        shapes[f"h.{layer}.mlp.c_fc.weight"] = [3072, 768]
    header = json.dumps({k: {"dtype": "F32", "shape": v, "data_offsets": [0, 0]} for k, v in shapes.items()}).encode()
    for step in sorted({*range(every, steps + 1, every), steps}):
        ckpt = os.path.join(run, "checkpoints", "step_%06d" % step)
        os.makedirs(ckpt, exist_ok=True)
        with open(os.path.join(ckpt, "model.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
    open(os.path.join(run, "checkpoints", "latest"), "w").write("step_%06d\n" % steps)
    print(f"completed: {steps} steps | 163.8k tok/s")
else:
    sys.exit(f"prism stub: unknown command {args}")
