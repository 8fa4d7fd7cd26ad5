"""Validation loss against the query position: how much each model gains from
context, and how it fares past the context it trained on.

    python scripts/plot/position_loss.py RUN [RUN ...] [--context T] [--out position_loss.png]

Reads /val/by_position/T<context> of each run (training writes the trained
context's at its end; `prism eval RUN --position-loss --context T` any other).
One panel per context measured, or only --context T. Each run is a line over
the position buckets ([0,1) [1,2) [2,4) ... on a log axis, drawn at the bucket's
middle) with its 95% interval over batches as a band; the trained context is a
dashed line, where a longer context begins to extrapolate.
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from prism_runs import add_output_args, find_runs, save, text  # noqa: E402


def by_position(run):
    """{context: (lo, hi, loss, se, attrs)} of the run's /val/by_position groups."""
    out = {}
    with h5py.File(run.path, "r", swmr=True) as f:
        if "val/by_position" not in f:
            return out
        for name, g in f["val/by_position"].items():
            if not isinstance(g, h5py.Group) or name.endswith(".partial"):
                continue
            attrs = {k: text(v) for k, v in g.attrs.items()}
            out[int(attrs["context"])] = (g["bucket_lo"][()], g["bucket_hi"][()], g["loss"][()], g["loss_se"][()],
                                          attrs)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--context", type=int, help="only this context (default: every one measured)")
    add_output_args(ap, "position_loss")
    a = ap.parse_args()
    runs = find_runs(a.runs)
    data = [(run, by_position(run)) for run in runs]
    for run, d in data:
        if not d:
            raise SystemExit(f"{run.path}: no /val/by_position. Fix: prism eval {run.path} --position-loss "
                             f"(runs trained by an older prism lack it)")
    contexts = sorted({c for _, d in data for c in d})
    if a.context is not None:
        if a.context not in contexts:
            raise SystemExit(f"no run has /val/by_position/T{a.context}. Fix: prism eval RUN --position-loss "
                             f"--context {a.context}, or pick one of {contexts}")
        contexts = [a.context]
    fig, axes = plt.subplots(1, len(contexts), figsize=(5.2 * len(contexts), 4), squeeze=False, sharey=True)
    cmap = plt.get_cmap("tab10")
    for ax, context in zip(axes[0], contexts):
        trained = set()
        for i, (run, d) in enumerate(data):
            if context not in d:
                continue
            lo, hi, loss, se, attrs = d[context]
            x = np.sqrt(np.maximum(lo, 0.5) * hi)  # the bucket's geometric middle (position 0 at 0.7)
            colour = cmap(i % 10)
            ax.plot(x, loss, "o-", ms=3, color=colour,
                    label=f"{run.name} ({run.schedule()}, {attrs.get('position', 'learned')}, seed {run.seed})")
            band = 1.96 * np.nan_to_num(se)
            ax.fill_between(x, loss - band, loss + band, color=colour, alpha=0.15, lw=0)
            trained.add(int(float(attrs.get("trained_context", 0))))
        for t in sorted(trained):
            if 0 < t < context:
                ax.axvline(t, ls="--", color="grey", lw=1)
                ax.text(t, ax.get_ylim()[1], f" trained context {t}", fontsize=7, va="top", color="grey")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("query position (bucket middle)")
        ax.set_title(f"validation loss by position, context {context}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("cross-entropy (nats)")
    save(fig, a, "position_loss")


if __name__ == "__main__":
    main()
