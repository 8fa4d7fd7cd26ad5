"""Reference for the study report's Delta D_l seed intervals on real runs: reads
each trial's held-out D_l (and D_l / i) from its run.h5 with h5py, pairs every
schedule's runs with the uniform runs of the same seed, and recomputes the
t-interval of the per-seed differences (scipy.stats.t) and its p-value
(scipy.stats.ttest_rel); compares them with the report's delta.csv.

    python delta_seed_reference.py SWEEP_DIR REPORT_DIR [--confidence C]

Prints "ok N checks", or the mismatches and exits 1.
"""
import argparse
import csv
import math
import os
import sys

import h5py
import numpy as np
from scipy import stats


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep")
    ap.add_argument("report")
    ap.add_argument("--confidence", type=float, default=0.95)
    a = ap.parse_args()
    runs = {}  # (schedule, seed) -> (D_l, D_l / i)
    for t in read(os.path.join(a.sweep, "summary.csv")):
        with h5py.File(os.path.join(a.sweep, t["run_dir"], "run.h5"), "r") as f:
            g = f["attention/heldout"]
            runs[(t["schedule"], t["seed"])] = (np.array(g["distance"]), np.array(g["distance_normalized"]))
    delta = read(os.path.join(a.report, "delta.csv"))
    checks, bad = 0, []
    for sched in sorted({s for s, _ in runs if s != "uniform"}):
        seeds = sorted(seed for s, seed in runs if s == sched and ("uniform", seed) in runs)
        for k, (column, suffix) in enumerate((("seed_ci", ""), ("seed_ci_normalized", "_normalized"))):
            diffs = np.array([runs[(sched, s)][k] - runs[("uniform", s)][k] for s in seeds])  # [seed][layer]
            for layer in range(diffs.shape[1]):
                x = diffs[:, layer]
                half = stats.t.ppf(0.5 + a.confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
                mine = [np.array(runs[(sched, s)][k])[layer] for s in seeds]
                theirs = [np.array(runs[("uniform", s)][k])[layer] for s in seeds]
                want = {f"{column}_lo": x.mean() - half, f"{column}_hi": x.mean() + half,
                        f"seed_p{suffix}": stats.ttest_rel(mine, theirs).pvalue}
                row = next(r for r in delta if r["schedule"] == sched and int(r["layer"]) == layer)
                if row["seed_method"] != "paired" or int(row["seed_pairs"]) != len(seeds):
                    bad.append(f"{sched} layer {layer}: {row['seed_method']}, {row['seed_pairs']} pairs; want paired, {len(seeds)}")
                for key, value in want.items():
                    checks += 1
                    got = float(row[key])
                    if not math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-9):
                        bad.append(f"{sched} layer {layer} {key}: report {got!r}, reference {value!r}")
    for b in bad:
        print(b)
    print(f"ok {checks} checks" if not bad and checks else f"{len(bad)} mismatches in {checks} checks")
    sys.exit(1 if bad or not checks else 0)


if __name__ == "__main__":
    main()
