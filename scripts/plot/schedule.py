"""Schedule diagram: heads per layer as bars, coloured and labelled by the head
width d_h, for one or more runs (or schedules given on the command line).

    python scripts/plot/schedule.py RUN [RUN ...] [--out schedule.png]
    python scripts/plot/schedule.py --heads 3,3,3,6,6,6,12x6 --d-model 768 [--heads ...]
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from prism_runs import add_output_args, compact, find_runs, save, transitions  # noqa: E402


def parse_heads(text):
    heads = []
    for part in text.strip("[]").split(","):
        n, _, k = part.strip().partition("x")
        heads += [int(n)] * (int(k) if k else 1)
    return heads


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--heads", action="append", default=[], help="a schedule: 3,3,3,6,6,6,12x6")
    ap.add_argument("--d-model", type=int, help="d_model for --heads schedules")
    add_output_args(ap, "schedule")
    a = ap.parse_args()
    rows = [(r.name, r.heads, r.d_model) for r in find_runs(a.runs)] if a.runs else []
    for h in a.heads:
        if not a.d_model:
            raise SystemExit("--heads needs --d-model. Fix: pass the model width, e.g. --d-model 768")
        rows.append(("schedule", parse_heads(h), a.d_model))
    if not rows:
        raise SystemExit("nothing to draw. Fix: pass runs, or --heads with --d-model")
    # One colour per head width, widest darkest.
    widths = sorted({d // h for _, heads, d in rows for h in heads if d}, reverse=True)
    cmap = plt.get_cmap("viridis")
    colour_of = {w: cmap(i / max(1, len(widths) - 1) * 0.85) for i, w in enumerate(widths)}
    fig, axes = plt.subplots(len(rows), 1, figsize=(7, 1.9 * len(rows) + 0.4), squeeze=False, sharex=True)
    for ax, (name, heads, d_model) in zip(axes[:, 0], rows):
        dh = [d_model // h if d_model else None for h in heads]
        colours = [colour_of[w] if w else "C0" for w in dh]
        ax.bar(range(len(heads)), heads, color=colours, edgecolor="black", lw=0.5)
        for l, (h, w) in enumerate(zip(heads, dh)):
            ax.text(l, h, f"{h}" + (f"\n{w}" if w else ""), ha="center", va="bottom", fontsize=7)
        for t in transitions(heads):
            ax.axvline(t, color="grey", ls="--", lw=0.8)
        ax.set_ylim(0, max(heads) * 1.45)
        ax.set_ylabel("heads")
        ax.set_title(f"{name}: {compact(heads)}" + (f" (d_model {d_model}; labels: heads / d_h)" if d_model else ""),
                     fontsize=9)
    axes[-1, 0].set_xlabel("layer")
    axes[-1, 0].set_xticks(range(max(len(h) for _, h, _ in rows)))
    if widths:
        fig.legend(handles=[Patch(color=colour_of[w], label=f"d_h = {w}") for w in widths], loc="upper right",
                   fontsize=7, title="head width", title_fontsize=7)
    save(fig, a, "schedule")


if __name__ == "__main__":
    main()
