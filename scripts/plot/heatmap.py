"""Per-head attention distance of one run: layers down, heads across.

    python scripts/plot/heatmap.py RUN [--source heldout|train] [--out heatmap.png]

heldout: the profile prism distance stored (/attention/heldout); train: the last
training-time measurement (/attention). Cells of heads a layer does not have
are left blank.
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from prism_runs import add_output_args, find_runs, save  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--source", choices=["heldout", "train"], default="heldout")
    add_output_args(ap, "heatmap")
    a = ap.parse_args()
    run = find_runs([a.run])[0]
    L, H = len(run.heads), max(run.heads)
    grid = np.full((L, H), np.nan)
    if a.source == "heldout":
        found = run.group("attention/heldout")
        if found is None:
            raise SystemExit(f"{run.path}: no /attention/heldout. Fix: prism distance {a.run} --data DIR, or --source train")
        data, attrs = found
        for l in range(L):
            grid[l, : run.heads[l]] = data[f"layer_{l:02d}/distance"]
        what = f"held-out, step {int(attrs['step'])}, {int(attrs['tokens'])} tokens"
    else:
        step, _ = run.series("attention", "distance")
        if not len(step):
            raise SystemExit(f"{run.path}: no training-time distance rows. Fix: train with train.distance_every > 0")
        for l in range(L):
            _, per_head = run.series("attention", f"layer_{l:02d}/distance")
            grid[l, : run.heads[l]] = per_head[-1]
        what = f"training-time, step {int(step[-1])}"
    fig, ax = plt.subplots(figsize=(1.2 + 0.55 * H, 1.2 + 0.45 * L))
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="magma", aspect="auto")
    fig.colorbar(im, ax=ax, label="mean attention distance (tokens)")
    if L * H <= 200:
        for l in range(L):
            for h in range(run.heads[l]):
                ax.text(h, l, f"{grid[l, h]:.1f}", ha="center", va="center", fontsize=6,
                        color="white" if grid[l, h] < np.nanmean(grid) else "black")
    ax.set_xticks(range(H))
    ax.set_yticks(range(L), [f"{l} ({run.heads[l]}h)" for l in range(L)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer (heads)")
    ax.set_title(f"{run.name} {run.schedule()}: {what}", fontsize=9)
    save(fig, a, "heatmap")


if __name__ == "__main__":
    main()
