"""Reference for `prism distance`: recomputes the held-out attention-distance
profile of a checkpoint with PyTorch from explicit attention probabilities
(d_i = sum_j p_ij (i - j), and d_i / i for i >= 1), reading the validation shard the way Prism's
sequential loader does (window k = tokens [k T, k T + T]), and compares it
with what prism wrote to run.h5 /attention/heldout (read with h5py).

    distance_reference.py MODEL.safetensors SHARD RUN.h5

Prints one JSON object: the largest absolute differences per kind of number,
and the profile's shape as stored.
"""
import json
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from eval_reference import load_model  # noqa: E402


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype=np.int32)
        assert header[0] == 20240520 and header[1] == 1
        return np.frombuffer(f.read(), dtype=np.uint16)[: header[2]].astype(np.int64)


def distances(model, idx):
    """Per layer (B, h, T) distances from explicit probabilities."""
    B, T = idx.shape
    x = model.wte(idx) + model.wpe(torch.arange(T))
    pos = torch.arange(T, dtype=torch.float64)
    offset = pos[:, None] - pos[None, :]  # i - j
    out = []
    for block in model.h:
        a = block.attn
        q, k, _ = a.c_attn(block.ln_1(x)).split(x.shape[-1], dim=2)
        q, k = (t.view(B, T, a.n_head, a.head_dim).transpose(1, 2) for t in (q, k))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(a.head_dim)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        p = F.softmax(att, dim=-1).double()
        out.append((p * offset.clamp(min=0)).sum(-1))
        x = x + a(block.ln_1(x))
        x = x + block.mlp(block.ln_2(x))
    return out


def main(ckpt, shard, h5):
    torch.set_num_threads(1)
    model, _ = load_model(ckpt)
    with h5py.File(h5, "r", swmr=True) as f:
        g = f["attention/heldout"]
        T, B, nb = int(g.attrs["seq_len"]), int(g.attrs["batch"]), int(g.attrs["batches"])
        edges = g["bin_edges"][:]
        heads = [int(h) for h in f.attrs["heads"]]
        stored = {
            "batch": [g[f"layer_{l:02d}/distance_by_batch"][:] for l in range(len(heads))],
            "position": [g[f"layer_{l:02d}/distance_by_position"][:] for l in range(len(heads))],
            "head": [g[f"layer_{l:02d}/distance"][:] for l in range(len(heads))],
            "layer": g["distance"][:],
            "layer_by_position": g["distance_by_position"][:],
            "normalized_batch": [g[f"layer_{l:02d}/distance_normalized_by_batch"][:] for l in range(len(heads))],
            "normalized_layer": g["distance_normalized"][:],
        }
    tokens = read_shard(shard)
    per_batch = [np.zeros((nb, h)) for h in heads]
    norm_batch = [np.zeros((nb, h)) for h in heads]
    inv_pos = 1.0 / torch.arange(1, T, dtype=torch.float64)
    pos_sum = [np.zeros((h, len(edges) - 1)) for h in heads]
    with torch.no_grad():
        for b in range(nb):
            idx = torch.tensor(np.stack([tokens[(b * B + s) * T:(b * B + s) * T + T] for s in range(B)]))
            for l, d in enumerate(distances(model, idx)):
                per_batch[l][b] = d.mean(dim=(0, 2)).numpy()
                norm_batch[l][b] = (d[:, :, 1:] * inv_pos).mean(dim=(0, 2)).numpy()
                for k in range(len(edges) - 1):
                    pos_sum[l][:, k] += d[:, :, edges[k]:edges[k + 1]].sum(dim=(0, 2)).numpy()
    widths = np.diff(edges) * B * nb
    per_pos = [s / widths for s in pos_sum]
    per_head = [pb.mean(0) for pb in per_batch]
    layer = np.array([h.mean() for h in per_head])
    out = {
        "layers": len(heads), "batches": nb, "bins": len(edges) - 1,
        "max_diff_batch": max(float(np.abs(a - s).max()) for a, s in zip(per_batch, stored["batch"])),
        "max_diff_position": max(float(np.abs(a - s).max()) for a, s in zip(per_pos, stored["position"])),
        "max_diff_head": max(float(np.abs(a - s).max()) for a, s in zip(per_head, stored["head"])),
        "max_diff_layer": float(np.abs(layer - stored["layer"]).max()),
        "max_diff_layer_by_position": float(np.abs(np.stack([p.mean(0) for p in per_pos]) - stored["layer_by_position"]).max()),
        "max_diff_normalized_batch": max(float(np.abs(a - s).max()) for a, s in zip(norm_batch, stored["normalized_batch"])),
        "max_diff_normalized_layer": float(np.abs(np.array([nb_.mean() for nb_ in norm_batch]) - stored["normalized_layer"]).max()),
        "layer": layer.tolist(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
