#!/usr/bin/env bash
# README's main job: builds prism, prepares the embedded Austen corpus with a
# compact vocabulary trained on it (once), and runs the CPU study's smallest
# slice (experiments/study/cpu-quick.yaml: the uniform baseline against a
# progressive schedule at width 128, about 2 minutes of training on 2 cores) into
# sweeps/cpu-quick. Then it measures both arms' attention distance on the same
# held-out tokens, plots Delta D_l, and samples text from the progressive model.
# Every loss it prints stands next to the unigram baseline of the same data.
# Rerunning keeps what finished, retries trials that failed before they trained (a
# missing corpus, say) and prints the results again. Needs scripts/setup.sh first.
#   scripts/quickstart.sh [key=value ...]      e.g. train.max_steps=1200
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/CMakeCache.txt ] || { echo "[quickstart] build/ is not configured. Fix: run scripts/setup.sh first" >&2; exit 2; }
say() { printf '[quickstart] %s\n' "$*"; }
say "building prism (the first build takes about 15 minutes on 2 cores; later ones seconds)"
cmake --build build -j"$(nproc)" --target prism
prism=build/apps/prism/prism
py=${PRISM_PYTHON:-.venv/bin/python}
data=data/cache/austen-bpe
start=$(date +%s)
# Ready means prepare.json, which prepare writes last; a directory alone proves nothing.
"$prism" data prepare --recipe austen-bpe --if-missing
"$prism" sweep experiments/study/cpu-quick.yaml "$@"

# The two arms' run directories, from the sweep's index.
uniform="" progressive=""
while read -r dir schedule; do
  if [ "$schedule" = uniform ]; then uniform=sweeps/cpu-quick/$dir; else progressive=sweeps/cpu-quick/$dir; fi
done < <(scripts/sweep-runs.sh sweeps/cpu-quick)
[ -n "$uniform" ] && [ -n "$progressive" ] || { say "error: the sweep has no completed uniform and progressive run" >&2; exit 1; }

echo
say "attention distance of both arms on the same held-out tokens (Delta D_l = progressive - uniform):"
"$prism" distance "$progressive" --baseline "$uniform" --data "$data" --tokens 32768
"$py" scripts/plot/delta.py "$progressive" --out sweeps/cpu-quick/delta.png
echo
say "validation loss against the unigram baseline (a model must beat it to use context):"
"$py" - "$progressive" "$uniform" "$data/prepare.json" <<'PY'
import json, sys, h5py
unigram = json.load(open(sys.argv[3]))["unigram_val_loss"]
for run in sys.argv[1:3]:
    with h5py.File(f"{run}/run.h5", "r") as f:
        loss = float(f["val/loss"][-1])
        heads = ",".join(str(int(h)) for h in f.attrs["heads"])
    print(f"  {run:<28} heads [{heads}]  val loss {loss:.4f}  unigram {unigram:.4f}  ({unigram - loss:.2f} nats below)")
PY
echo
say "a sample from the progressive model (temperature 0.8, top-k 40):"
"$prism" sample "$progressive" --prompt "It is a truth universally acknowledged" --tokens 60 --seed 1 2>/dev/null
echo
say "done in $(( $(date +%s) - start )) s after the build. Results: sweeps/cpu-quick (summary.csv, sweep.h5, one run.h5 per arm)"
say "Delta D_l per layer: sweeps/cpu-quick/delta.png"
say "next: $prism export sweeps/cpu-quick --what val (the curves as CSV), or scripts/study-cpu.sh (the whole CPU study)"
