"""The figures of a study report: what `prism report SWEEP_DIR... --out DIR` lists
in DIR/figures.csv, drawn from the report's own tables (no run is read again):

  loss-<scale>.png                  validation loss against training tokens, one
                                    colour per configuration (its seeds thin, their
                                    mean thick), the milestone levels dotted and the
                                    unigram baseline dashed;
  delta-<scale>-<schedule>.png      Delta D_l per layer (one point per layer: the
                                    layers are discrete, nothing is drawn between
                                    them) with its intervals over batches (thick
                                    bar: the precision for these models) and over
                                    seeds (thin bar with caps: the evidence about the
                                    schedule), the schedule's transition points
                                    dashed, and beside it the position-normalised
                                    Delta (d / i) with its seed interval.

    python scripts/plot/study_report.py DIR [--dpi N]

scripts/study-report.sh runs `prism report` and then this script.
"""
import argparse
import csv
import math
import os
from collections import OrderedDict, defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def config_label(row):
    return row["schedule"] + (f" ({row['settings']})" if row.get("settings") else "")


def loss_figure(path, scale, title, curves, milestones, dpi):
    rows = [r for r in curves if r["scale"] == scale]
    by_config = OrderedDict()
    for r in rows:
        by_config.setdefault(config_label(r), defaultdict(list))[r["run"]].append(r)
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for i, (label, runs) in enumerate(by_config.items()):
        colour = f"C{i % 10}"
        steps = defaultdict(list)
        for run_rows in runs.values():
            x = np.array([num(r["tokens"]) for r in run_rows])
            y = np.array([num(r["loss"]) for r in run_rows])
            ax.plot(x, y, color=colour, lw=0.7, alpha=0.35)
            for r in run_rows:
                steps[int(r["step"])].append((num(r["tokens"]), num(r["loss"])))
        full = sorted(s for s, v in steps.items() if len(v) == len(runs))
        if full:
            x = [np.mean([t for t, _ in steps[s]]) for s in full]
            y = [np.mean([l for _, l in steps[s]]) for s in full]
            ax.plot(x, y, color=colour, lw=1.8, label=f"{label} ({len(runs)} seed{'s' if len(runs) != 1 else ''})")
    unigram = [num(r["unigram_val_loss"]) for r in rows if math.isfinite(num(r["unigram_val_loss"]))]
    if unigram:
        ax.axhline(unigram[0], color="grey", ls="--", lw=1, label=f"unigram baseline {unigram[0]:.3f}")
    levels = sorted({num(r["level"]) for r in milestones if r["scale"] == scale})
    for k, level in enumerate(levels):
        ax.axhline(level, color="black", ls=":", lw=0.7, label="milestone levels" if k == 0 else None)
    finals = [num(r["loss"]) for r in rows]
    if finals and levels:
        lo = min(min(finals), min(levels))
        hi = max(levels) + (max(levels) - lo) * 0.6
        ax.set_ylim(lo - 0.05 * (hi - lo), hi)
    ax.set_xlabel("training tokens")
    ax.set_ylabel("validation loss (nats)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def delta_figure(path, scale, schedule_label, title, delta, dpi):
    rows = [r for r in delta if r["scale"] == scale and config_label(r) == schedule_label]
    if not rows:
        raise SystemExit(f"{path}: delta.csv has no rows for {scale} / {schedule_label}")
    layer = np.array([int(r["layer"]) for r in rows])
    d = np.array([num(r["delta"]) for r in rows])
    blo, bhi = np.array([num(r["batch_ci_lo"]) for r in rows]), np.array([num(r["batch_ci_hi"]) for r in rows])
    slo, shi = np.array([num(r["seed_ci_lo"]) for r in rows]), np.array([num(r["seed_ci_hi"]) for r in rows])
    dn = np.array([num(r["delta_normalized"]) for r in rows])
    heads = [int(r["heads"]) for r in rows]
    head_dim = [int(r["head_dim"]) for r in rows]
    trans = [int(r["layer"]) for r in rows if r["transition"] == "1"]
    nslo = np.array([num(r.get("seed_ci_normalized_lo")) for r in rows])
    nshi = np.array([num(r.get("seed_ci_normalized_hi")) for r in rows])
    method = rows[0].get("seed_method", "")
    has_norm = np.isfinite(dn).any()
    fig, axes = plt.subplots(1, 2 if has_norm else 1, figsize=(11 if has_norm else 6.5, 4.2), squeeze=False)
    ax = axes[0][0]
    ax.axhline(0, color="grey", lw=0.8)
    # Discrete layers: points and bars, no line or band between them.
    ax.plot(layer, d, "o", color="C0", label="Delta D_l (tokens)", zorder=3)
    ok = np.isfinite(blo)
    if ok.any():
        ax.errorbar(layer[ok] - 0.08, d[ok], yerr=[d[ok] - blo[ok], bhi[ok] - d[ok]], fmt="none", ecolor="C0",
                    elinewidth=4, alpha=0.45, label="interval over batches (these models)")
    s = np.isfinite(slo)
    if s.any():
        ax.errorbar(layer[s] + 0.08, d[s], yerr=[d[s] - slo[s], shi[s] - d[s]], fmt="none", ecolor="C3", capsize=3,
                    label=f"interval over seeds ({'paired' if method == 'paired' else method or 'none'})")
    for i, t in enumerate(trans):
        for a in axes[0]:
            a.axvline(t - 0.5, color="C2", ls="--", lw=1, label="transition" if i == 0 else None)
    for l, h, dh in zip(layer, heads, head_dim):
        ax.annotate(f"{h}h/{dh}", (l, 1.01), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                    fontsize=6, color="C2")
    ax.set_xticks(layer)
    ax.set_xlabel("layer")
    ax.set_ylabel("Delta attention distance (tokens)")
    ax.set_title(title, pad=16, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if has_norm:
        ax2 = axes[0][1]
        ax2.axhline(0, color="grey", lw=0.8)
        ax2.plot(layer, dn, "s", color="C1", label="Delta of d / i (share of the prefix)", zorder=3)
        n = np.isfinite(nslo) & np.isfinite(dn)
        if n.any():
            ax2.errorbar(layer[n], dn[n], yerr=[dn[n] - nslo[n], nshi[n] - dn[n]], fmt="none", ecolor="C3",
                         capsize=3, label="interval over seeds")
        ax2.set_xticks(layer)
        ax2.set_xlabel("layer")
        ax2.set_ylabel("Delta normalised distance")
        ax2.set_title("normalised by query position", fontsize=9)
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=7)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="the report directory (prism report --out)")
    ap.add_argument("--dpi", type=int, default=150)
    a = ap.parse_args()
    need = ["figures.csv", "curves.csv", "milestones.csv", "delta.csv"]
    for n in need:
        if not os.path.isfile(os.path.join(a.dir, n)):
            raise SystemExit(f"{a.dir}/{n} missing. Fix: prism report SWEEP_DIR... --out {a.dir}")
    figures = read(os.path.join(a.dir, "figures.csv"))
    curves = read(os.path.join(a.dir, "curves.csv"))
    milestones = read(os.path.join(a.dir, "milestones.csv"))
    delta = read(os.path.join(a.dir, "delta.csv"))
    for f in figures:
        path = os.path.join(a.dir, f["file"])
        if f["kind"] == "loss":
            loss_figure(path, f["scale"], f["title"], curves, milestones, a.dpi)
        elif f["kind"] == "delta":
            delta_figure(path, f["scale"], f["schedule"], f["title"], delta, a.dpi)
        else:
            raise SystemExit(f"figures.csv: unknown kind {f['kind']!r}")
        print(path)


if __name__ == "__main__":
    main()
