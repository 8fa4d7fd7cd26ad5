"""Attention distance against the query position, one line per layer, from the
held-out profile (prism distance): where in the context each layer looks back.

    python scripts/plot/position.py RUN [RUN ...] [--out position.png]
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from prism_runs import add_output_args, find_runs, save  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    add_output_args(ap, "position")
    a = ap.parse_args()
    runs = find_runs(a.runs)
    fig, axes = plt.subplots(1, len(runs), figsize=(4.8 * len(runs), 4), squeeze=False, sharey=True)
    for ax, run in zip(axes[0], runs):
        found = run.group("attention/heldout")
        if found is None:
            raise SystemExit(f"{run.path}: no /attention/heldout. Fix: prism distance {run.path} --data DIR")
        d, _ = found
        edges = d["bin_edges"]
        centres = (edges[:-1] + edges[1:] - 1) / 2
        cmap = plt.get_cmap("viridis")
        for l, row in enumerate(d["distance_by_position"]):
            ax.plot(centres, row, "o-", ms=3, color=cmap(l / max(1, len(run.heads) - 1)),
                    label=f"layer {l} ({run.heads[l]}h)")
        ax.plot(centres, centres / 2, ":", color="grey", label="uniform attention (i/2)")
        ax.set_xlabel("query position")
        ax.set_title(f"{run.name} {run.schedule()}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("mean attention distance (tokens)")
    save(fig, a, "position")


if __name__ == "__main__":
    main()
