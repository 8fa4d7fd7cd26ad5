"""Delta D_l = D_l(Prism) - D_l(baseline) per layer, with its confidence
intervals and the schedule's transition points, and per query-position bin.

    python scripts/plot/delta.py RUN [--out delta.png]

RUN: a Prism run (run.h5 or run directory) on which
`prism distance RUN --baseline BASE --data DIR` stored /attention/delta.
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from prism_runs import add_output_args, compact, find_runs, save, transitions  # noqa: E402


def label(heads):
    return f"uniform {heads[0]}" if len(set(heads)) == 1 else f"[{compact(heads)}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    add_output_args(ap, "delta")
    a = ap.parse_args()
    run = find_runs([a.run])[0]
    found = run.group("attention/delta")
    if found is None:
        raise SystemExit(f"{run.path}: no /attention/delta. Fix: prism distance {a.run} --baseline BASE --data DIR")
    d, attrs = found
    layers, delta = d["layer"], d["delta"]
    heads, base = [int(h) for h in d["heads"]], [int(h) for h in d["baseline_heads"]]
    conf = float(attrs["confidence"])
    has_pos = d["delta_by_position"].size > 0
    fig, axes = plt.subplots(1, 2 if has_pos else 1, figsize=(11 if has_pos else 6.5, 4.2), squeeze=False)
    ax = axes[0][0]
    lo, hi = d["batch_ci_lo"], d["batch_ci_hi"]
    ok = np.isfinite(lo)
    ax.axhline(0, color="grey", lw=0.8)
    # Discrete layers: points and bars, nothing drawn between them.
    ax.plot(layers, delta, "o", color="C0", label="Delta D_l", zorder=3)
    if ok.any():
        ax.errorbar(layers[ok] - 0.08, delta[ok], yerr=[delta[ok] - lo[ok], hi[ok] - delta[ok]], fmt="none",
                    ecolor="C0", elinewidth=4, alpha=0.45,
                    label=f"{conf * 100:g}% CI over {int(attrs['batches'])} batches (these models)")
    slo, shi = d["seed_ci_lo"], d["seed_ci_hi"]
    if np.isfinite(slo).any():
        s = np.isfinite(slo)
        ax.errorbar(layers[s] + 0.08, delta[s], yerr=[delta[s] - slo[s], shi[s] - delta[s]], fmt="none",
                    ecolor="C3", capsize=3, label=f"{conf * 100:g}% CI over seeds")
    for i, t in enumerate(transitions(heads)):
        ax.axvline(t, color="C2", ls="--", lw=1, label="schedule transition" if i == 0 else None)
    if run.d_model:
        for l, h in zip(layers, heads):
            ax.annotate(f"d_h={run.d_model // h}", (l, 1.01), xycoords=("data", "axes fraction"), ha="center",
                        va="bottom", fontsize=7, color="C2")
    ax.set_xticks(layers)
    ax.set_xlabel("layer")
    ax.set_ylabel("Delta attention distance (tokens)")
    ax.set_title(f"Prism {label(heads)} minus baseline {label(base)}", pad=16)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if has_pos:
        ax2 = axes[0][1]
        edges = d["bin_edges"]
        centres = (edges[:-1] + edges[1:] - 1) / 2
        cmap = plt.get_cmap("viridis")
        for l, row in enumerate(d["delta_by_position"]):
            ax2.plot(centres, row, "o-", ms=3, color=cmap(l / max(1, len(layers) - 1)), label=f"layer {l}")
        ax2.axhline(0, color="grey", lw=0.8)
        ax2.set_xlabel("query position")
        ax2.set_ylabel("Delta attention distance (tokens)")
        ax2.set_title("by query position")
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=7, ncol=2)
    save(fig, a, "delta")


if __name__ == "__main__":
    main()
