"""Reference for the study report's statistics (prism report), recomputed with
numpy and scipy from the report's inputs and compared with its CSV tables:

  - Prism - uniform final-loss differences: paired by seed (scipy.stats.ttest_rel
    and the t-interval of the per-seed differences), or Welch's
    (scipy.stats.ttest_ind(equal_var=False)) when fewer than 2 seeds pair up;
  - Delta D_l per layer (and for d / i): each run's D_l is the mean over heads of
    its per-head means over batches; the seed interval is the t-interval of the
    per-seed differences (paired), its p-value scipy's ttest_rel;
  - Holm's step-down adjustment (Holm 1979) of each family of p-values: the loss
    differences, the Delta D_l seed tests, the Delta D_l/i seed tests, the
    zero-shot tests;
  - milestone ratios: each run's first crossing of a level, interpolated linearly
    between evaluations; per seed the ratio to the uniform run's; the geometric
    mean and the exponentiated t-interval of the log ratios;
  - zero-shot: per seed pair on the same items, the items only one side got right
    (acc_norm), summed; McNemar's exact test is scipy.stats.binomtest(b, b + c);
  - per paired loss difference: the sd of the differences, the minimum detectable effect
    at 80% power (exact, from scipy's noncentral t) at alpha and at alpha / m (Holm's first
    step), the TOST p against the margin (two one-sided scipy t-tests) with Holm over the
    report's TOSTs, and the verdict (better/worse by the Holm p, else equivalent by the
    Holm TOST p, else unresolved).

    python study_stats_reference.py INPUT.json REPORT_DIR

INPUT.json (written by the test): {"confidence": c, "configs": [{"schedule", "uniform", "runs": [{"seed", "final", "val": [[step, loss]],
"distance": [[batch][layer][head]], "normalized": [...], "items": [0/1 ...]}]}]}.
Prints one line per mismatch and exits 1, or prints "ok N checks".
"""
import csv
import json
import math
import sys

import numpy as np
from scipy import stats
from scipy.optimize import brentq

checks = 0
failures = []


def close(what, got, want, tol=1e-9):
    global checks
    checks += 1
    if got == "" and (want is None or (isinstance(want, float) and math.isnan(want))):
        return
    try:
        g = float(got)
    except ValueError:
        failures.append(f"{what}: report has {got!r}, reference {want!r}")
        return
    if want is None or math.isnan(want) or not math.isclose(g, want, rel_tol=tol, abs_tol=tol):
        failures.append(f"{what}: report {g!r}, reference {want!r}")


def equal(what, got, want):
    global checks
    checks += 1
    if got != want:
        failures.append(f"{what}: report {got!r}, reference {want!r}")


def holm(p):
    """Holm (1979): sort ascending, p_(k) * (m - k + 1), running max, cap at 1."""
    idx = [i for i, v in enumerate(p) if not math.isnan(v)]
    order = sorted(idx, key=lambda i: p[i])
    m = len(order)
    out = [math.nan] * len(p)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (m - k)))
        out[i] = running
    return out


def t_interval(x, c):
    x = np.asarray(x, dtype=float)
    if len(x) < 2:
        return math.nan, math.nan
    half = stats.t.ppf(0.5 + c / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return x.mean() - half, x.mean() + half


def welch_interval(a, b, c):
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = stats.t.ppf(0.5 + c / 2, df) * math.sqrt(va + vb)
    d = a.mean() - b.mean()
    return d - half, d + half


def crossing(val, level):
    for i, (step, loss) in enumerate(val):
        if loss <= level:
            if i == 0:
                return float(step)
            s0, l0 = val[i - 1]
            f = 1.0 if l0 == loss else (l0 - level) / (l0 - loss)
            return s0 + f * (step - s0)
    return math.nan


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def main():
    spec = json.load(open(sys.argv[1]))
    report = sys.argv[2]
    c = spec["confidence"]
    configs = spec["configs"]
    base = next(cfg for cfg in configs if cfg["uniform"])
    base_by_seed = {r["seed"]: r for r in base["runs"]}
    prisms = [cfg for cfg in configs if not cfg["uniform"]]

    # Final loss differences and their Holm family.
    loss_rows = {r["schedule"]: r for r in read(f"{report}/final_loss.csv")}
    loss_p, expected = [], {}
    for cfg in prisms:
        pairs = [(r["final"], base_by_seed[r["seed"]]["final"]) for r in cfg["runs"] if r["seed"] in base_by_seed]
        if len(pairs) >= 2:
            d = [a - b for a, b in pairs]
            lo, hi = t_interval(d, c)
            p = stats.ttest_rel([a for a, _ in pairs], [b for _, b in pairs]).pvalue
            expected[cfg["schedule"]] = ("paired", np.mean(d), lo, hi, p)
        else:
            a, b = [r["final"] for r in cfg["runs"]], [r["final"] for r in base["runs"]]
            lo, hi = welch_interval(a, b, c)
            p = stats.ttest_ind(a, b, equal_var=False).pvalue
            expected[cfg["schedule"]] = ("welch", np.mean(a) - np.mean(b), lo, hi, p)
        loss_p.append(p)
    # Power and equivalence of the paired differences: exact power from the noncentral t
    # (scipy.stats.nct, solved with brentq), TOST from two one-sided scipy t-tests, Holm over
    # the TOSTs, and the verdict rule.
    alpha = 1 - c
    margin = spec.get("margin", 0.01)
    tests = sum(1 for p in loss_p if not math.isnan(p))
    tost_p = []
    for cfg in prisms:
        pairs = [(r["final"], base_by_seed[r["seed"]]["final"]) for r in cfg["runs"] if r["seed"] in base_by_seed]
        if len(pairs) >= 2:
            d = np.array([a - b for a, b in pairs])
            p_low = stats.ttest_1samp(d + margin, 0.0, alternative="greater").pvalue
            p_high = stats.ttest_1samp(d - margin, 0.0, alternative="less").pvalue
            tost_p.append(max(p_low, p_high))
        else:
            tost_p.append(math.nan)
    tost_holm = holm(tost_p)

    def mde(sd, n, a, power=0.8):
        df = n - 1
        crit = stats.t.ppf(1 - a / 2, df)

        def pw(e):
            lower = stats.nct.cdf(-crit, df, e * math.sqrt(n))  # below 1e-6 here; scipy gives NaN far in this tail
            return stats.nct.sf(crit, df, e * math.sqrt(n)) + (0.0 if math.isnan(lower) else lower)
        hi = 1.0
        while pw(hi) < power:  # bracket the root: scipy's nct is NaN far out in the tail
            hi *= 2
        return brentq(lambda e: pw(e) - power, 1e-9, hi, xtol=1e-14) * sd

    for cfg, ph, tp, th in zip(prisms, holm(loss_p), tost_p, tost_holm):
        row = loss_rows[cfg["schedule"]]
        method, mean = expected[cfg["schedule"]][0], expected[cfg["schedule"]][1]
        close(f"{cfg['schedule']} tost_p", row["tost_p"], tp)
        close(f"{cfg['schedule']} tost_p_holm", row["tost_p_holm"], th)
        close(f"{cfg['schedule']} margin", row["margin"], margin)
        if method == "paired":
            pairs = [(r["final"], base_by_seed[r["seed"]]["final"]) for r in cfg["runs"] if r["seed"] in base_by_seed]
            d = np.array([a - b for a, b in pairs])
            sd = d.std(ddof=1)
            close(f"{cfg['schedule']} diff_sd", row["diff_sd"], sd)
            close(f"{cfg['schedule']} mde", row["mde"], mde(sd, len(d), alpha), tol=1e-7)
            close(f"{cfg['schedule']} mde_holm", row["mde_holm"], mde(sd, len(d), alpha / tests), tol=1e-7)
        if not math.isnan(ph) and ph < alpha:
            want = "better" if mean < 0 else "worse"
        elif not math.isnan(th) and th < alpha:
            want = "equivalent"
        else:
            want = "unresolved"
        equal(f"{cfg['schedule']} verdict", row["verdict"], want)

    for cfg, ph in zip(prisms, holm(loss_p)):
        method, mean, lo, hi, p = expected[cfg["schedule"]]
        row = loss_rows[cfg["schedule"]]
        equal(f"{cfg['schedule']} diff_method", row["diff_method"], method)
        close(f"{cfg['schedule']} diff", row["diff_vs_uniform"], mean)
        close(f"{cfg['schedule']} diff_ci_lo", row["diff_ci_lo"], lo)
        close(f"{cfg['schedule']} diff_ci_hi", row["diff_ci_hi"], hi)
        close(f"{cfg['schedule']} diff_p", row["diff_p"], p)
        close(f"{cfg['schedule']} diff_p_holm", row["diff_p_holm"], ph)

    # Delta D_l, paired by seed, and the Holm families of its seed tests.
    delta_rows = read(f"{report}/delta.csv")
    fam, fam_n, where = [], [], []
    for cfg in prisms:
        pairs = [(r, base_by_seed[r["seed"]]) for r in cfg["runs"] if r["seed"] in base_by_seed]
        for key, suffix in (("distance", ""), ("normalized", "_normalized")):
            def d_l(run):
                # [batch][layer][head] (layers differ in heads) -> [layer]: mean over heads of the means over batches
                x = run[key]
                return [np.mean([np.mean([x[b][l][h] for b in range(len(x))]) for h in range(len(x[0][l]))])
                        for l in range(len(x[0]))]

            for layer in range(len(cfg["runs"][0][key][0])):
                row = next(r for r in delta_rows if r["schedule"] == cfg["schedule"] and int(r["layer"]) == layer)
                if len(pairs) >= 2:
                    per_seed = [d_l(a)[layer] - d_l(b)[layer] for a, b in pairs]
                    method = "paired"
                    lo, hi = t_interval(per_seed, c)
                    p = stats.ttest_1samp(per_seed, 0.0).pvalue
                else:
                    a = [d_l(r)[layer] for r in cfg["runs"]]
                    b = [d_l(r)[layer] for r in base["runs"]]
                    method = "welch"
                    lo, hi = welch_interval(a, b, c)
                    p = stats.ttest_ind(a, b, equal_var=False).pvalue
                what = f"{cfg['schedule']} layer {layer}{suffix}"
                equal(what + " seed_method", row["seed_method"], method)
                close(what + " seed_ci_lo", row["seed_ci_lo" if not suffix else "seed_ci_normalized_lo"], lo)
                close(what + " seed_ci_hi", row["seed_ci_hi" if not suffix else "seed_ci_normalized_hi"], hi)
                close(what + " seed_p", row["seed_p" + suffix], p)
                (fam if not suffix else fam_n).append(p)
                where.append((row, suffix))
    adjusted = iter(holm(fam))
    adjusted_n = iter(holm(fam_n))
    for row, suffix in where:
        want = next(adjusted) if not suffix else next(adjusted_n)
        close(f"{row['schedule']} layer {row['layer']} seed_p_holm{suffix}", row["seed_p_holm" + suffix], want)

    # Milestone ratios, paired by seed.
    miles = read(f"{report}/milestones.csv")
    levels = [float(m["level"]) for m in miles if m["schedule"] == "uniform"]
    for cfg in prisms:
        for k, level in enumerate(levels):
            logs = []
            for r in cfg["runs"]:
                if r["seed"] in base_by_seed:
                    mine, theirs = crossing(r["val"], level), crossing(base_by_seed[r["seed"]]["val"], level)
                    logs.append(math.log(mine / theirs))
            row = next(m for m in miles if m["schedule"] == cfg["schedule"] and int(m["milestone"]) == k + 1)
            if not logs:
                equal(f"{cfg['schedule']} milestone {k + 1} ratio", row["steps_ratio_to_uniform"], "")
                continue
            lo, hi = t_interval(logs, c)
            close(f"{cfg['schedule']} milestone {k + 1} ratio", row["steps_ratio_to_uniform"], math.exp(np.mean(logs)))
            close(f"{cfg['schedule']} milestone {k + 1} ratio_ci_lo", row["ratio_ci_lo"], math.exp(lo) if len(logs) > 1 else math.nan)
            close(f"{cfg['schedule']} milestone {k + 1} ratio_ci_hi", row["ratio_ci_hi"], math.exp(hi) if len(logs) > 1 else math.nan)

    # Zero-shot: McNemar on the same items, Holm over the tests.
    zero = read(f"{report}/zero_shot.csv")
    zp, zrows = [], []
    for cfg in prisms:
        b = cc = pairs = 0
        for r in cfg["runs"]:
            if r["seed"] in base_by_seed:
                pairs += 1
                u = base_by_seed[r["seed"]]["items"]
                b += sum(1 for x, y in zip(r["items"], u) if x and not y)
                cc += sum(1 for x, y in zip(r["items"], u) if y and not x)
        row = next(z for z in zero if z["schedule"] == cfg["schedule"])
        equal(f"{cfg['schedule']} seed_pairs_tested", row["seed_pairs_tested"], str(pairs))
        equal(f"{cfg['schedule']} only_this_right", row["only_this_right"], str(b))
        equal(f"{cfg['schedule']} only_uniform_right", row["only_uniform_right"], str(cc))
        p = (stats.binomtest(b, b + cc, 0.5).pvalue if b + cc > 0 else 1.0) if pairs else math.nan
        close(f"{cfg['schedule']} mcnemar_p", row["mcnemar_p"], p)
        zp.append(p)
        zrows.append(row)
    for row, ph in zip(zrows, holm(zp)):
        close(f"{row['schedule']} mcnemar_p_holm", row["mcnemar_p_holm"], ph)

    for f in failures:
        print(f)
    print(f"ok {checks} checks" if not failures else f"{len(failures)} of {checks} checks failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
