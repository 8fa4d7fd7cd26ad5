#!/usr/bin/env bash
# The CPU study end to end (docs/results/cpu-study/): widths 128 and 192, each a
# successive-halving search over progressive schedules against uniform on 6
# seeds (experiments/study/cpu-{128,192}.yaml), and at width 128 the full grid
# the search is measured against (cpu-128-grid.yaml); then the report. About 90
# minutes on 2 cores. Resumable: rerun it after an interruption; finished runs
# are kept and interrupted ones resume from their checkpoints.
#   scripts/study-cpu.sh                  run what is missing, then the report
#   scripts/study-cpu.sh --report-only    rebuild the report from sweeps/cpu-study-*
set -euo pipefail
cd "$(dirname "$0")/.."
prism=${PRISM:-build/apps/prism/prism}
[ -x "$prism" ] || { echo "study-cpu: $prism not built. Fix: cmake --build build" >&2; exit 2; }
if [ "${1:-}" != --report-only ]; then
  "$prism" data prepare --recipe austen-bpe --if-missing
  "$prism" sweep experiments/study/cpu-128.yaml
  # The grid's runs that the search also trained to the end are the same runs
  # (same configuration, seed and data order; training on the CPU is
  # deterministic): copy them instead of training them twice. The copies keep
  # their own record of where they came from.
  grid=sweeps/cpu-study-128-grid
  mkdir -p "$grid"
  for done in sweeps/cpu-study-128/*/rung1; do
    [ -f "$done/run.h5" ] || continue
    trial=$(basename "$(dirname "$done")")
    if [ ! -e "$grid/$trial" ] && grep -q '"status": *"completed"' "$done/trial.json" 2>/dev/null; then
      cp -a "$done" "$grid/$trial"
      echo "copied from $done" > "$grid/$trial/COPIED_FROM"
    fi
  done
  force=()
  [ -f "$grid/sweep.yaml" ] || force=(--force)  # the directory holds only the copies so far
  "$prism" sweep experiments/study/cpu-128-grid.yaml "${force[@]}"
  "$prism" sweep experiments/study/cpu-192.yaml
fi
exec scripts/study-report.sh
