"""Where the depth-2 searches' rankings depart from the ground truth, and whether
averaging searches or fine-tuning each schedule from the shared weights closes
the gap. Run from docs/results/search-cpu/depth2 with a Python that has scipy
(the repository's .venv):

    python finetune/agreement.py

Reads inputs/ (the ground truth's summary.csv, each search's ranking.csv) and
finetune/inputs/ft-V-METHODN/summary.csv (the fine-tuned schedules, variant V,
from search METHOD seed N). Kendall tau-b against the ground truth's 15-seed means
over its 14 schedules, as `prism search --ground-truth` computes it.
"""
import csv
import itertools
import os
import statistics as st

from scipy.stats import kendalltau, rankdata

gt = {}
for r in csv.DictReader(open('inputs/search-ground-truth-depth2/summary.csv')):
    if r['status'] == 'completed':
        gt.setdefault(r['heads'], []).append(float(r['final_val_loss']))
means = {k: st.mean(v) for k, v in gt.items()}
order = sorted(means, key=means.get)  # best first
truth = [means[k] for k in order]
label = lambda h: 'x'.join([h.strip('[]').split(', ')[0], '2']) if len(set(h.strip('[]').split(', '))) == 1 \
    else h.strip('[]').replace(' ', '')


def tau(losses):
    return kendalltau(truth, [losses[k] for k in order])[0]


def search_losses(method, n):
    rows = csv.DictReader(open(f'inputs/search-d2-{method}-seed{n}/ranking.csv'))
    return {'[' + ', '.join(r['heads'].split()) + ']': float(r['loss']) for r in rows}


print('1. Averaging searches: tau of the mean loss of k searches (all combinations of the 6)')
for method in ('mixture', 'spos'):
    runs = [search_losses(method, n) for n in range(6)]
    cells = []
    for k in (1, 2, 3, 6):
        ts = [tau({h: st.mean(runs[i][h] for i in c) for h in order}) for c in itertools.combinations(range(6), k)]
        cells.append(f'k={k}: {st.mean(ts):.3f} [{min(ts):.3f}, {max(ts):.3f}]')
    print(f'  {method:8s}', ' | '.join(cells))

print('\n2. Rank of each ground-truth schedule (1 = best of the 14) in the 6 searches, best first')
for method in ('mixture', 'spos'):
    runs = [search_losses(method, n) for n in range(6)]
    ranks = [dict(zip(order, rankdata([r[k] for k in order]))) for r in runs]
    print(f'  {method}')
    for i, k in enumerate(order):
        print(f'    {label(k):6s} truth {i + 1:2d}  searches {" ".join(f"{int(x[k]):2d}" for x in ranks)}'
              f'  mean {st.mean(x[k] for x in ranks):4.1f}')

def finetuned(path):
    """Each fine-tuned schedule's place in the fine-tuned ranking (lower is better): by loss, and
    under successive halving (variant H) the last rung's schedules first, then the earlier rung's,
    as `prism search --ground-truth` orders them."""
    rows = [r for r in csv.DictReader(open(path)) if r['status'] in ('completed', 'pruned')]
    rows.sort(key=lambda r: (-int(r['rung'] or 0), float(r['final_val_loss'])))
    return {r['heads']: i for i, r in enumerate(rows)}


print('\n3. Fine-tuned from each search\'s shared weights (finetune/inputs/ft-V-METHODN)')
dirs = sorted(d for d in os.listdir('finetune/inputs') if d.startswith('ft-'))
for method in ('mixture', 'spos'):
    for v in sorted({d.split('-')[1] for d in dirs}):
        seeds = sorted(int(d[len(f'ft-{v}-{method}'):]) for d in dirs if d.startswith(f'ft-{v}-{method}'))
        if not seeds:
            continue
        ts, shared, picks, rank_best = [], [], [], []
        for n in seeds:
            d = finetuned(f'finetune/inputs/ft-{v}-{method}{n}/summary.csv')
            assert set(order) <= set(d), f'ft-{v}-{method}{n}: not all 14 schedules completed'
            ts.append(tau(d))
            shared.append(tau(search_losses(method, n)))
            picks.append(label(min(d, key=d.get)) + ('' if min(d, key=d.get) in means else ' (outside the 14)'))
            rank_best.append(int(rankdata([d[k] for k in order])[0]))
        print(f'  {method} variant {v}, searches {seeds} ({len(d)} schedules fine-tuned in the last):')
        print(f'    tau {" ".join(f"{t:.3f}" for t in ts)} (mean {st.mean(ts):.3f}); from the shared weights '
              f'{" ".join(f"{t:.3f}" for t in shared)} (mean {st.mean(shared):.3f})')
        print(f'    best after fine-tuning: {", ".join(picks)}; the true best (32x2) ranked {rank_best} of the 14')

if os.path.exists('finetune/inputs/scratch150/summary.csv'):
    print('\n4. Control: each of the 14 trained from scratch for the fine-tune\'s 150 steps (finetune/inputs/scratch150)')
    by_seed = {}
    for r in csv.DictReader(open('finetune/inputs/scratch150/summary.csv')):
        if r['status'] == 'completed':
            by_seed.setdefault(int(r['seed']), {})[r['heads']] = float(r['final_val_loss'])
    ts = {n: tau(d) for n, d in sorted(by_seed.items()) if set(order) <= set(d)}
    print(f'    tau per seed {" ".join(f"{n}: {t:.3f}" for n, t in ts.items())} (mean {st.mean(ts.values()):.3f})')
    bests = [label(min(d, key=d.get)) for n, d in sorted(by_seed.items()) if n in ts]
    print(f'    best per seed: {", ".join(bests)}')

if os.path.exists('finetune/inputs/ft-picks/summary.csv'):
    print('\n5. The fine-tuned picks outside the 14 (32,16: searches 6 (C, H) and 4 (H); 8,16: 3 (H); 16,8: 5 (H)) '
          'retrained from scratch on the EPYC (finetune/inputs/ft-picks, ft-H-picks*), paired by seed with the best, '
          '32x2, as the EPYC trains it (ft-picks) and as the ground truth has it (seeds 0-9 from the Xeon)')
    from scipy.stats import t as student
    runs = {}
    for sweep in sorted(d for d in os.listdir('finetune/inputs') if d == 'ft-picks' or d.startswith('ft-H-picks')):
        if not os.path.exists(f'finetune/inputs/{sweep}/summary.csv'):
            continue
        for r in csv.DictReader(open(f'finetune/inputs/{sweep}/summary.csv')):
            if r['status'] == 'completed':
                runs.setdefault(r['heads'], {})[int(r['seed'])] = float(r['final_val_loss'])
    gt_runs = {int(r['seed']): float(r['final_val_loss'])
               for r in csv.DictReader(open('inputs/search-ground-truth-depth2/summary.csv')) if r['heads'] == '[32, 32]'}
    b = runs['[32, 32]']

    def paired(a, ref):
        seeds = sorted(set(a) & set(ref))
        diff = [a[s] - ref[s] for s in seeds]
        m, h = st.mean(diff), student.ppf(0.975, len(diff) - 1) * st.stdev(diff) / len(diff) ** 0.5
        return f'{m:+.4f} [{m - h:+.4f}, {m + h:+.4f}] ({"in" if m - h <= 0 <= m + h else "outside"} the top band)'

    for heads in sorted(h for h in runs if h != '[32, 32]'):
        a = runs[heads]
        print(f'    {label(heads)} (mean of {len(a)} seeds {st.mean(a.values()):.4f}) - 32x2: on the EPYC {paired(a, b)}; '
              f'against the ground truth {paired(a, gt_runs)}')
    seeds = sorted(b)
    same = [s for s in seeds if s >= 10 and gt_runs.get(s) == b[s]]
    print(f'    32x2 seeds 10-14 (run on this machine for the ground truth too) reproduce it exactly: {len(same)} of '
          f'{len([s for s in seeds if s >= 10])}; seeds 0-9 (the ground truth\'s ran on the Xeon) differ by '
          f'{st.mean(b[s] - gt_runs[s] for s in seeds if s < 10):+.4f} on average')
