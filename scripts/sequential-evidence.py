#!/usr/bin/env python3
"""Evidence for the seeds-until-resolved design (lib/prism/stats/sequential.h).

For each scenario (a design FIRST:STEP:CAP, m comparisons against uniform, the sd of a
paired difference, the target effect = the equivalence margin) this runs
`prism sweep FILE --dry-run`, which prints the design's per-look levels and its C++
simulation over 10,000 studies, then simulates the same design again here, in numpy,
from the printed levels only (an independent implementation of the design's rule:
seeds drawn per look, paired t and TOST per comparison, sticky verdicts, stop when
all are resolved), over --sims studies per truth. Writes one CSV row per scenario.

  .venv/bin/python scripts/sequential-evidence.py --prism build/apps/prism/prism \
      --out docs/results/sequential/evidence.csv
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from scipy import stats

SCENARIOS = [  # (first, step, cap, comparisons, sd, effect)
    (3, 3, 21, 1, 0.013, 0.01),
    (3, 3, 21, 2, 0.013, 0.01),
    (3, 3, 21, 4, 0.013, 0.01),
    (4, 4, 24, 1, 0.013, 0.0144),
    (5, 5, 25, 2, 0.013, 0.0084),
]
HEADS = [[2, 4], [1, 4], [4, 2], [2, 2]]  # test-tiny: 2 layers; any schedules (hard rules off)


def dry_run(prism, first, step, cap, m, sd, effect):
    heads = ", ".join(str(h) for h in HEADS[:m])
    text = f"""model: {{preset: test-tiny, vocab_size: 512}}
train: {{max_steps: 4, batch_size: 2, seq_len: 16, dtype: fp32, eval_every: 0, distance_every: 0, checkpoint_every: 0}}
schedule: {{hard_rules: false}}
sweep:
  power: {{sd: {sd}, source: 'scenario', effect: {effect}}}
  sequential: {{first: {first}, step: {step}, cap: {cap}}}
  grid:
    schedule.heads: [{heads}]
"""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.yaml")
        with open(path, "w") as f:
            f.write(text)
        out = subprocess.run([prism, "sweep", path, "--dry-run"], capture_output=True, text=True, cwd=d)
    if out.returncode != 0:
        sys.exit(f"prism sweep --dry-run failed:\n{out.stdout}{out.stderr}")
    s = out.stdout
    lv = re.search(r"better/worse at p < ([0-9.e-]+), equivalent within \+-[0-9.]+ at TOST p < ([0-9.e-]+)", s)
    sim = re.search(r"no effect: a false better/worse verdict in ([0-9.]+)% of studies \(at most 5%\), ([0-9.]+) pairs "
                    r"on average; an effect of exactly \+-[0-9.]+: a false \"equivalent\" in ([0-9.]+)%; an effect of "
                    r"[0-9.]+: the right verdict for ([0-9.]+)% of comparisons with ([0-9.]+) pairs on average "
                    r"\(([0-9]+)% stop before [0-9]+\), where a fixed design of that power at the same level needs "
                    r"([0-9-]+) pairs", s)
    if not lv or not sim:
        sys.exit(f"cannot read the dry run's sequential lines:\n{s}")
    return float(lv.group(1)), float(lv.group(2)), [float(x) if x != "-" else float("nan") for x in sim.groups()]


def simulate(first, step, cap, m, sd, effect, margin, lv_diff, lv_eq, sims, rng):
    """The design's rule, vectorised over studies: returns (any better/worse, any equivalent,
    share of right verdicts, mean pairs)."""
    looks = list(range(first, cap, step)) + [cap]
    u = rng.normal(0, sd / np.sqrt(2), (sims, cap))
    s = rng.normal(0, sd / np.sqrt(2), (sims, m, cap))
    d = effect + s - u[:, None, :]
    verdict = np.zeros((sims, m), dtype=np.int8)  # 0 open, 1 better, 2 worse, 3 equivalent
    used = np.full(sims, cap)
    stopped = np.zeros(sims, dtype=bool)
    for n in looks:
        x = d[:, :, :n]
        mean = x.mean(axis=2)
        se = x.std(axis=2, ddof=1) / np.sqrt(n)
        df = n - 1
        p = 2 * stats.t.sf(np.abs(mean / se), df)
        p_low = stats.t.sf((mean + margin) / se, df)
        p_high = stats.t.cdf((mean - margin) / se, df)
        tost = np.maximum(p_low, p_high)
        live = (verdict == 0) & ~stopped[:, None]
        diff = live & (p < lv_diff)
        verdict[diff & (mean < 0)] = 1
        verdict[diff & (mean >= 0)] = 2
        eq = live & ~diff & (tost < lv_eq)
        verdict[eq] = 3
        done = ~stopped & (verdict != 0).all(axis=1)
        used[done] = n
        stopped |= done
    truth = 3 if abs(effect) < margin else (1 if effect < 0 else 2)
    return ((verdict == 1) | (verdict == 2)).any(axis=1).mean(), (verdict == 3).any(axis=1).mean(), \
        (verdict == truth).mean() if effect != 0 or margin > 0 else float("nan"), used.mean()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prism", default="build/apps/prism/prism")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sims", type=int, default=20000)
    a = ap.parse_args()
    prism = os.path.abspath(a.prism)
    rng = np.random.default_rng(20261207)
    rows = []
    for first, step, cap, m, sd, effect in SCENARIOS:
        lv_diff, lv_eq, cpp = dry_run(prism, first, step, cap, m, sd, effect)
        null = simulate(first, step, cap, m, sd, 0.0, effect, lv_diff, lv_eq, a.sims, rng)
        edge = simulate(first, step, cap, m, sd, effect, effect, lv_diff, lv_eq, a.sims, rng)
        real = simulate(first, step, cap, m, sd, -effect, effect, lv_diff, lv_eq, a.sims, rng)
        fixed = int(cpp[6]) if cpp[6] == cpp[6] else ""
        row = {"design": f"{first}:{step}:{cap}", "comparisons": m, "sd": sd, "effect_and_margin": effect,
               "level_difference": lv_diff, "level_equivalence": lv_eq,
               "cpp_sims": 10000, "cpp_false_difference_null": cpp[0] / 100, "cpp_false_equivalent_edge": cpp[2] / 100,
               "cpp_right_at_effect": cpp[3] / 100, "cpp_mean_pairs_at_effect": cpp[4], "cpp_mean_pairs_null": cpp[1],
               "numpy_sims": a.sims, "numpy_false_difference_null": null[0], "numpy_false_equivalent_edge": edge[1],
               "numpy_right_at_effect": real[2], "numpy_mean_pairs_at_effect": real[3], "numpy_mean_pairs_null": null[3],
               "fixed_pairs_same_power": fixed}
        rows.append(row)
        print(", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    worst = max(max(r["cpp_false_difference_null"], r["numpy_false_difference_null"],
                    r["cpp_false_equivalent_edge"], r["numpy_false_equivalent_edge"]) for r in rows)
    print(f"largest false-verdict rate over every scenario and both simulations: {worst:.4f} (alpha 0.05)")
    return 0 if worst <= 0.05 + 2.6 * np.sqrt(0.05 * 0.95 / min(a.sims, 10000)) else 1


if __name__ == "__main__":
    sys.exit(main())
