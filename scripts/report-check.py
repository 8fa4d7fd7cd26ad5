#!/usr/bin/env python3
"""Recomputes a study report's loss comparisons from its own CSVs, with numpy and scipy
alone, and says where the report differs:

  from paired.csv (each seed's schedule and uniform final losses and their difference):
  - Prism - uniform: the mean paired difference, its t-interval, ttest_rel's p-value and
    Holm's adjustment over the report's loss tests;
  - the sd of the differences, the minimum detectable effect at 80% power (exact, from the
    noncentral t) at alpha and at alpha / m (Holm's first step, m loss tests);
  - the equivalence test (two one-sided t-tests against final_loss.csv's margin) and its
    Holm adjustment over the report's TOSTs;
  - the verdict: better / worse where the Holm-adjusted p is below alpha, else equivalent
    where the Holm-adjusted TOST p is, else unresolved.
Every row of final_loss.csv that compares with uniform must be paired (a Welch row is named
and left out).

    python3 scripts/report-check.py REPORT_DIR      (e.g. docs/results/cpu-study)

Prints one line per mismatch and exits 1, or "ok: N rows, M values agree".
"""
import csv
import math
import sys
from collections import defaultdict

import numpy as np
from scipy import stats
from scipy.optimize import brentq


def holm(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (len(p) - k)))
        out[i] = running
    return out


def mde(sd, n, alpha, power=0.8):
    df, crit = n - 1, stats.t.ppf(1 - alpha / 2, n - 1)

    def pw(e):
        lower = stats.nct.cdf(-crit, df, e * math.sqrt(n))
        return stats.nct.sf(crit, df, e * math.sqrt(n)) + (0.0 if math.isnan(lower) else lower)

    hi = 1.0
    while pw(hi) < power:
        hi *= 2
    return brentq(lambda e: pw(e) - power, 1e-9, hi, xtol=1e-14) * sd


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    rows = [r for r in csv.DictReader(open(f"{d}/final_loss.csv")) if r["diff_method"]]
    pairs = defaultdict(list)
    failures, values = [], 0
    for r in csv.DictReader(open(f"{d}/paired.csv")):
        pairs[(r["scale"], r["schedule"], r["settings"])].append(float(r["diff"]))
        values += 1
        if not math.isclose(float(r["diff"]), float(r["val_loss"]) - float(r["uniform_val_loss"]), abs_tol=1e-12):
            failures.append(f"paired.csv {r['schedule']} seed {r['seed']}: diff {r['diff']} is not val_loss - uniform_val_loss")
    unpaired = [r for r in rows if r["diff_method"] != "paired"]
    for r in unpaired:
        print(f"left out: {r['scale']} {r['schedule']} {r['settings']}: {r['diff_method']}, not paired")
    rows = [r for r in rows if r["diff_method"] == "paired"]
    if not rows:
        sys.exit(f"{d}/final_loss.csv has no paired comparison to check")
    ref = []
    for r in rows:
        x = np.array(pairs[(r["scale"], r["schedule"], r["settings"])])
        conf = float(r["confidence"])
        m = float(r["margin"])
        half = stats.t.ppf(0.5 + conf / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
        tost = max(stats.ttest_1samp(x + m, 0.0, alternative="greater").pvalue,
                   stats.ttest_1samp(x - m, 0.0, alternative="less").pvalue)
        ref.append({"diff_pairs": len(x), "diff_vs_uniform": x.mean(), "diff_ci_lo": x.mean() - half,
                    "diff_ci_hi": x.mean() + half, "diff_p": stats.ttest_1samp(x, 0.0).pvalue,
                    "diff_sd": x.std(ddof=1), "tost_p": tost, "alpha": 1 - conf})
    tests = len(ref) + len(unpaired)  # Holm's family: every loss test of the report
    loss_holm = holm([e["diff_p"] for e in ref] + [float(r["diff_p"]) for r in unpaired])
    tost_holm = holm([e["tost_p"] for e in ref] + [float(r["tost_p"]) for r in unpaired])
    for r, e, ph, th in zip(rows, ref, loss_holm, tost_holm):
        a = e.pop("alpha")
        e["diff_p_holm"], e["tost_p_holm"] = ph, th
        e["mde"], e["mde_holm"] = mde(e["diff_sd"], e["diff_pairs"], a), mde(e["diff_sd"], e["diff_pairs"], a / tests)
        verdict = ("better" if e["diff_vs_uniform"] < 0 else "worse") if ph < a else "equivalent" if th < a else "unresolved"
        name = f"{r['scale']} {r['schedule']}{' ' + r['settings'] if r['settings'] else ''}"
        for k, want in e.items():
            values += 1
            if not math.isclose(float(r[k]), want, rel_tol=1e-7, abs_tol=1e-9):
                failures.append(f"{name} {k}: report {r[k]}, recomputed {want!r}")
        values += 1
        if r["verdict"] != verdict:
            failures.append(f"{name} verdict: report {r['verdict']}, recomputed {verdict}")
    for f in failures:
        print(f)
    if failures:
        sys.exit(1)
    print(f"ok: {len(rows)} rows, {values} values agree")


if __name__ == "__main__":
    main()
