"""How a weight-sharing schedule search's choice evolved, layer by layer, and its ranking.

    python scripts/plot/search.py RUN [--out search.png]

RUN: the run directory (or run.h5) of `prism search`; it may still be running.
Top row, one panel per layer, against the optimizer step:
  - mixture: the architecture weight p of every head count (/search/weights);
  - spos: the per-layer score of every head count (/search/scores: the change in
    held-out loss a layer's count makes under the shared weights, fitted to random
    schedules at every validation; lower is better), when the search probed them.
  The head count the layer would choose then is marked. Bottom: the ranking
  (/search/ranking, once written): every exactly evaluated schedule's held-out loss
  under the shared weights, best first, the decoded pick (rules 1-3) and the
  unconstrained one marked.
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from prism_runs import add_output_args, compact, find_runs, save, text  # noqa: E402


def read_search(path):
    with h5py.File(path, "r", swmr=True) as f:
        if "search/step" not in f:
            raise SystemExit(f"{path}: no /search group. Fix: pass the run directory of prism search")
        g = f["search"]
        out = {
            "choices": [int(c) for c in g.attrs["choices"]],
            "layers": int(g.attrs["layers"]),
            "slots": int(g.attrs["slots"]),
            "method": text(g.attrs["method"]),
        }
        n = len(g["step"])
        out["step"] = g["step"][:n]
        out["weights"] = g["weights"][:n]
        out["heads"] = g["heads"][:n]
        m = len(g["scores/step"])
        out["score_step"] = g["scores/step"][:m]
        out["score"] = g["scores/score"][:m]
        out["choice"] = g["scores/choice"][:m]
        out["ranking"] = None
        if "ranking" in g:
            r = g["ranking"]
            out["ranking"] = {
                "heads": r["heads"][()],
                "loss": r["loss"][()],
                "hard_rules": r["hard_rules"][()],
                "decoded": text(r.attrs.get("decoded", "")),
                "unconstrained": text(r.attrs.get("unconstrained", "")),
            }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--title", default=None)
    add_output_args(ap, "search")
    a = ap.parse_args()
    run = find_runs([a.run])[0]
    s = read_search(run.path)
    L, K, choices = s["layers"], len(s["choices"]), s["choices"]
    has_weights = len(s["weights"]) and np.isfinite(s["weights"]).any()
    has_scores = len(s["score_step"]) > 0
    rows = 2 if s["ranking"] is not None else 1
    fig = plt.figure(figsize=(max(8, 2.2 * L), 3.0 * rows + 0.6))
    grid = fig.add_gridspec(rows, L, height_ratios=[1] * rows)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for l in range(L):
        ax = fig.add_subplot(grid[0, l])
        if has_weights:
            w = s["weights"].reshape(len(s["step"]), L, K)[:, l, :]
            for k in range(K):
                ax.plot(s["step"], w[:, k], color=colours[k % len(colours)], lw=1.2, label=f"{choices[k]} heads")
            ax.set_ylim(-0.02, 1.02)
            ax.set_ylabel("architecture weight p" if l == 0 else "")
            final = choices[int(np.argmax(w[-1]))] if len(w) else None
        elif has_scores:
            sc = s["score"].reshape(len(s["score_step"]), L, K)[:, l, :]
            for k in range(K):
                ax.plot(s["score_step"], sc[:, k], "o-", ms=3, color=colours[k % len(colours)], lw=1.2,
                        label=f"{choices[k]} heads")
            ax.axhline(0, color="grey", lw=0.6)
            ax.set_ylabel("score (Δ loss, lower is better)" if l == 0 else "")
            final = int(s["choice"][-1, l])
        else:
            counts = np.array([[np.sum(s["heads"].reshape(len(s["step"]), -1, L)[:, :, l] == c)] for c in choices])
            ax.bar(range(K), counts[:, 0], color=[colours[k % len(colours)] for k in range(K)])
            ax.set_xticks(range(K), [str(c) for c in choices])
            ax.set_ylabel("micro-batches sampled" if l == 0 else "")
            final = None
        ax.set_title(f"layer {l}" + (f": {final} heads" if final else ""), fontsize=9)
        ax.set_xlabel("step" if (has_weights or has_scores) else "head count")
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if l == L - 1:
            ax.legend(fontsize=7, loc="best")
    if s["ranking"] is not None:
        r = s["ranking"]
        ax = fig.add_subplot(grid[1, :])
        loss = np.asarray(r["loss"], dtype=float)
        names = [compact([int(h) for h in row]) for row in r["heads"]]
        x = np.arange(len(loss))
        ok = np.asarray(r["hard_rules"]) == 1
        ax.plot(x[ok], loss[ok], "o", color="C0", ms=4, label="obeys rules 1-3")
        ax.plot(x[~ok], loss[~ok], "x", color="C3", ms=5, label="breaks rule 2 or 3")
        for tag, name, colour in (("decoded", r["decoded"], "C2"), ("unconstrained", r["unconstrained"], "C1")):
            if name in names:
                i = names.index(name)
                ax.annotate(f"{tag}: {name}", (i, loss[i]), textcoords="offset points", xytext=(8, 10 if tag == "decoded" else -14),
                            fontsize=8, color=colour, arrowprops=dict(arrowstyle="-", color=colour))
        if len(names) <= 40:
            ax.set_xticks(x, names, rotation=60, ha="right", fontsize=6)
        ax.set_xlabel("schedule, ranked by held-out loss under the shared weights")
        ax.set_ylabel("held-out loss (nats)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(a.title or f"{s['method']} search: {run.name}", fontsize=11)
    fig.tight_layout()
    save(fig, a, "search")


if __name__ == "__main__":
    main()
