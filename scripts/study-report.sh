#!/usr/bin/env bash
# The CPU study's report, from the sweep directories alone (no training):
# held-out attention distance of the last rung's runs (Prism vs uniform, every
# seed), tidy exports (prism export) and the plots and tables in
# docs/results/cpu-study/ (scripts/plot/study_report.py).
#   scripts/study-report.sh [OUT_DIR]          default docs/results/cpu-study
# Environment: PRISM_DISTANCE_TOKENS (default 16384) held-out tokens per run.
set -euo pipefail
cd "$(dirname "$0")/.."
prism=${PRISM:-build/apps/prism/prism}
py=${PRISM_PYTHON:-.venv/bin/python}
out=${1:-docs/results/cpu-study}
tokens=${PRISM_DISTANCE_TOKENS:-16384}
mkdir -p "$out"
sizes=()
for w in 128 192 256; do
  sweep=sweeps/cpu-study-$w
  [ -f "$sweep/summary.csv" ] || { echo "study-report: $sweep/summary.csv missing (run scripts/study-cpu.sh); skipping width $w" >&2; continue; }
  "$prism" sweep "$sweep" --collect > "$out/ranking-$w.txt"
  # The last rung's runs: "run_dir schedule" lines.
  mapfile -t rows < <(scripts/sweep-runs.sh "$sweep")
  prism_runs=() uniform_runs=()
  for row in "${rows[@]}"; do
    if [ "${row#* }" = uniform ]; then uniform_runs+=("$sweep/${row%% *}"); else prism_runs+=("$sweep/${row%% *}"); fi
  done
  if [ ${#prism_runs[@]} -eq 0 ] || [ ${#uniform_runs[@]} -eq 0 ]; then
    echo "study-report: $sweep has no finished Prism and uniform runs at its last rung yet; skipping width $w" >&2
    continue
  fi
  sizes+=("$w")
  # Measure once; a rerun reuses /attention/delta (delete it to re-measure).
  if ! "$prism" export "${prism_runs[0]}" --what delta > /dev/null 2>&1; then
    "$prism" distance "${prism_runs[@]}" --baseline "${uniform_runs[@]}" --data data/cache/austen --tokens "$tokens" \
      > "$out/distance-$w.txt"
  fi
  "$prism" export "$sweep" --what summary --out "$out/summary-$w.csv"
  # The same grid without halving, when it was run (to check halving kept its winner).
  if [ -f "$sweep-full/summary.csv" ]; then
    "$prism" export "$sweep-full" --what summary --out "$out/summary-$w-full.csv"
  fi
  "$prism" export "${prism_runs[@]}" "${uniform_runs[@]}" --what val --out "$out/val-$w.csv"
  "$prism" export "${prism_runs[@]}" "${uniform_runs[@]}" --what loss --out "$out/loss-$w.csv"
  "$prism" export "${prism_runs[@]}" --what delta --out "$out/delta-$w.csv"
  "$py" scripts/plot/loss.py "${prism_runs[@]}" "${uniform_runs[@]}" --x tokens --smooth 5 \
    --title "CPU study, width $w: Prism vs uniform (3 seeds)" --out "$out/loss-$w.png"
  "$py" scripts/plot/delta.py "${prism_runs[0]}" --out "$out/delta-$w.png"
  "$py" scripts/plot/schedule.py "${prism_runs[0]}" "${uniform_runs[0]}" --out "$out/schedule-$w.png"
done
[ ${#sizes[@]} -gt 0 ] || { echo "study-report: nothing to report yet" >&2; exit 1; }
"$py" scripts/plot/study_report.py "$out" "${sizes[@]}"
echo "study-report: $out/README.md"
