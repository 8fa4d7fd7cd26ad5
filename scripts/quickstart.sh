#!/usr/bin/env bash
# README's main job: builds prism, tokenizes the embedded Austen corpus (once) and
# runs the CPU study's smallest slice (experiments/study/cpu-quick.yaml: uniform vs a
# progressive schedule at width 128, about a minute on 2 cores) into sweeps/cpu-quick.
# Rerunning keeps what finished, retries trials that failed before they trained (a
# missing corpus, say) and prints the table again. Needs scripts/setup.sh first.
#   scripts/quickstart.sh [key=value ...]      e.g. train.max_steps=162
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/CMakeCache.txt ] || { echo "[quickstart] build/ is not configured. Fix: run scripts/setup.sh first" >&2; exit 2; }
echo "[quickstart] building prism (the first build takes about 15 minutes on 2 cores; later ones seconds)"
cmake --build build -j"$(nproc)" --target prism
prism=build/apps/prism/prism
# Ready means prepare.json, which prepare writes last; a directory alone proves nothing.
"$prism" data prepare --recipe austen --if-missing
"$prism" sweep experiments/study/cpu-quick.yaml "$@"
echo "[quickstart] results: sweeps/cpu-quick (summary.csv, sweep.h5, one run.h5 per trial);"
echo "[quickstart] next: $prism export sweeps/cpu-quick --what val (the curves as CSV), or scripts/study-cpu.sh (the whole CPU study, ~1 h)"
