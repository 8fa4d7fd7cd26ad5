"""Reference for the trainer's validation loss and its standard error: the
checkpoint's mean cross-entropy on each of the first N validation batches
(windows of T+1 tokens read in order, consecutive windows sharing one token, as
prism's TokenLoader reads them), then their mean and the sample sd of the
per-batch means over sqrt(N): what run.h5's /val/loss and /val/loss_se hold.
Also each batch's mean loss per bucket of query positions [0,1) [1,2) [2,4) ...
[2^k, T) ("by_position": batches x buckets, and "edges"): what
/val/by_position/T<T>/loss_by_batch holds.

    python val_loss_reference.py MODEL.safetensors VAL_SHARD --batch B --seq T --batches N
"""
import argparse
import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("shard")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batches", type=int, required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from eval_reference import load_model

    model, _ = load_model(a.checkpoint)
    with open(a.shard, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        tokens = np.frombuffer(f.read(), dtype=np.uint16)[: header[2]].astype(np.int64)
    T = a.seq
    edges, start = [0], 1
    while start < T:
        edges.append(start)
        start *= 2
    edges.append(T)
    losses, by_position = [], []
    for b in range(a.batches):
        rows = [tokens[(b * a.batch + i) * T:(b * a.batch + i) * T + T + 1] for i in range(a.batch)]
        w = torch.tensor(np.stack(rows))
        with torch.no_grad():
            logits, _ = model(w[:, :-1])
        per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), w[:, 1:].reshape(-1),
                                    reduction="none").reshape(a.batch, T)
        losses.append(float(per_token.mean()))
        by_position.append([float(per_token[:, lo:hi].mean()) for lo, hi in zip(edges[:-1], edges[1:])])
    n = len(losses)
    mean = sum(losses) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in losses) / (n - 1) / n) if n > 1 else float("nan")
    print(json.dumps({"losses": losses, "mean": mean, "se": se, "edges": edges, "by_position": by_position}))


if __name__ == "__main__":
    main()
