"""Loss curves of several runs, schedules in the legend.

    python scripts/plot/loss.py RUN [RUN ...] [--x step|tokens] [--smooth N] [--out loss.png]

RUN: a run.h5, a run directory or a sweep directory (every trial). Training
loss as thin lines (optionally a running mean over N steps), validation loss
as markers in the same colour.
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from prism_runs import add_output_args, find_runs, save  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--x", choices=["step", "tokens"], default="step")
    ap.add_argument("--smooth", type=int, default=1, help="running mean over N training steps")
    ap.add_argument("--title", default="Training and validation loss")
    add_output_args(ap, "loss")
    a = ap.parse_args()
    runs = find_runs(a.runs)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, run in enumerate(runs):
        c = colours[i % len(colours)]
        step, loss = run.series("train", "loss")
        x = run.series("train", "tokens")[1] if a.x == "tokens" else step
        if a.smooth > 1 and len(loss) >= a.smooth:
            loss = np.convolve(loss, np.ones(a.smooth) / a.smooth, mode="valid")
            x = x[a.smooth - 1:]
        ax.plot(x, loss, color=c, lw=1.0, alpha=0.8, label=f"{run.label()} train")
        vstep, vloss = run.series("val", "loss")
        if len(vloss):
            vx = run.series("val", "tokens")[1] if a.x == "tokens" else vstep
            ax.plot(vx, vloss, "o--", color=c, ms=4, lw=0.8, label=f"{run.label()} val")
    ax.set_xlabel("training tokens" if a.x == "tokens" else "optimizer step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(a.title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, a, "loss")


if __name__ == "__main__":
    main()
