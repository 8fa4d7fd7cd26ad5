"""Recomputes the from-scratch baselines of `prism search --ground-truth` (baselines.csv: "grid of all
N schedules x k seeds" and "random b of the N schedules x k seeds") from the ground truth's summary.csv
alone, independently of the C++ (numpy, scipy), and fails on any difference.

Every enumerated row (sampled = 0): P(pick = best), the pick in the top band, the mean regret and its
central 95% of draws; tau's mean and range where the row has at most 50,000 draws (scipy's kendalltau
per draw is slow beyond). Sampled rows (200,000 draws from the C++'s fixed seed) are not recomputed.

Run from docs/results/search-cpu/depth2:  ../../../../.venv/bin/python finetune/baselines_check.py
"""
import csv
import itertools
import math
import sys

import numpy as np
from scipy import stats

GT = "inputs/search-ground-truth-depth2/summary.csv"
TABLES = ["baselines.csv", "decoded/baselines.csv", "finetune/baselines.csv"]


def ground_truth():
    loss = {}
    for r in csv.DictReader(open(GT)):
        if r["status"] == "completed" and r["final_val_loss"]:
            loss.setdefault(r["schedule"], {}).setdefault(int(r["seed"]), float(r["final_val_loss"]))
    seeds = sorted(set.intersection(*[set(v) for v in loss.values()]))
    names = sorted(loss, key=lambda s: np.mean([loss[s][x] for x in seeds]))
    m = np.array([[loss[s][x] for x in seeds] for s in names])
    mean = m.mean(1)
    # The top band: the paired t-interval against the best contains 0.
    band = []
    for i in range(len(names)):
        d = m[i] - m[0]
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
        band.append(i == 0 or (d.mean() - half <= 0 <= d.mean() + half))
    return m, mean, np.array(band)


def central95(v):
    v = np.sort(np.asarray(v))
    at = lambda q: v[int(math.floor(q * (len(v) - 1) + 0.5))]
    return at(0.025), at(0.975)


def recompute(m, mean, band, count, k, with_tau):
    n, s = m.shape
    seed_sets = list(itertools.combinations(range(s), k))
    mask = np.zeros((len(seed_sets), s), bool)
    for i, c in enumerate(seed_sets):
        mask[i, list(c)] = True
    trained = (m[None, :, :] * mask[:, None, :]).sum(2) / k          # [seed set, schedule]
    held = (m[None, :, :] * ~mask[:, None, :]).sum(2) / (s - k)
    best, in_band, regret, tau = [], [], [], []
    for sched in itertools.combinations(range(n), count):
        sched = list(sched)
        picks = np.array(sched)[trained[:, sched].argmin(1)]
        best.append(picks == 0)
        in_band.append(band[picks])
        regret.append(mean[picks] - mean[0])
        if with_tau:
            tau.extend(stats.kendalltau(trained[i, sched], held[i, sched])[0] for i in range(len(seed_sets)))
    best, in_band, regret = (np.concatenate(x) for x in (best, in_band, regret))
    return best.mean(), in_band.mean(), regret.mean(), central95(regret), (np.mean(tau), *central95(tau)) if with_tau else None


def main():
    m, mean, band = ground_truth()
    checked = failed = 0
    for path in TABLES:
        for row in csv.DictReader(open(path)):
            if not row["seeds_per_schedule"] or row["sampled"] == "1":
                continue
            k, count, draws = int(row["seeds_per_schedule"]), int(row["schedules"]), int(row["draws"])
            with_tau = draws <= 50000
            p, b, r, (rlo, rhi), t = recompute(m, mean, band, count, k, with_tau)
            want = [p, b, r, rlo, rhi] + (list(t) if t else [])
            cols = ["p_pick_best", "pick_in_top_band", "mean_regret", "regret_lo", "regret_hi"] + (
                ["tau_mean", "tau_lo", "tau_hi"] if t else [])
            got = [float(row[c]) for c in cols]
            ok = np.allclose(got, want, rtol=1e-9, atol=1e-12)
            checked += 1
            failed += not ok
            print(f"{'ok  ' if ok else 'DIFF'} {path}: {row['baseline']}" + ("" if ok else f"\n  tool {got}\n  here {want}"))
    print(f"{checked} rows recomputed, {failed} differ")
    sys.exit(1 if failed or not checked else 0)


if __name__ == "__main__":
    main()
