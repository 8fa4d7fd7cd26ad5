#!/usr/bin/env bash
# The CPU study end to end: three model sizes (experiments/study/cpu-{128,192,256}.yaml),
# each a successive-halving search over progressive schedules ending in uniform
# vs the best schedule, 3 seeds; then held-out attention distance and the report
# in docs/results/cpu-study/. About an hour on 2 cores. Resumable: rerun it after
# an interruption and finished trials are kept, interrupted ones resume.
#   scripts/study-cpu.sh                  run what is missing, then the report
#   scripts/study-cpu.sh --report-only    rebuild the report from sweeps/cpu-study-*
set -euo pipefail
cd "$(dirname "$0")/.."
prism=${PRISM:-build/apps/prism/prism}
[ -x "$prism" ] || { echo "study-cpu: $prism not built. Fix: cmake --build build" >&2; exit 2; }
if [ "${1:-}" != --report-only ]; then
  [ -d data/cache/austen ] || "$prism" data prepare --recipe austen
  for w in 128 192 256; do
    "$prism" sweep "experiments/study/cpu-$w.yaml"
  done
fi
exec scripts/study-report.sh
