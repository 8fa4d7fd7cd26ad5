#!/usr/bin/env bash
# A study's report from its sweep directories alone (no training): first the
# post-processing each trial still needs (held-out attention distance, Delta D_l,
# and the zero-shot tasks the post file names; resumable, one child process per
# trial), then the numbers (prism report: report.md and one CSV per table, with
# each schedule's training throughput against uniform measured here as prism
# bench train measures it, the two arms' steps taking turns) and the figures
# (scripts/plot/study_report.py).
#   scripts/study-report.sh [options] OUT_DIR SWEEP_DIR...
#     --post FILE        the post file (default experiments/study/post/distance.yaml:
#                        distance only); --no-post to report what is there
#     --set key=value    an override of the post file (repeatable), e.g. --set task_dir=/scratch/tasks
#     --title TEXT       the report's title
#     --bench-steps N    timed steps per arm of each throughput bench (default 20: about
#                        20 s per schedule at width 128 on one Xeon core); --no-bench: none
#   scripts/study-report.sh            the CPU study: docs/results/cpu-study from every
#                                      sweeps/cpu-study-* directory (search sweeps before
#                                      their -grid copies: a run in both is reported once)
# Examples:
#   scripts/study-report.sh --post experiments/study/post/paper.yaml --set task_dir=/scratch/tasks \
#       reports/paper sweeps/study-124m sweeps/study-354m sweeps/study-757m
#   scripts/study-report.sh --no-post docs/results/cpu-study sweeps/cpu-study-128 sweeps/cpu-study-128-grid sweeps/cpu-study-192
# Environment: PRISM (the binary), PRISM_PYTHON (the Python with matplotlib).
set -euo pipefail
cd "$(dirname "$0")/.."
prism=${PRISM:-build/apps/prism/prism}
py=${PRISM_PYTHON:-.venv/bin/python}
post=experiments/study/post/distance.yaml
sets=() title=() bench=(--bench-steps 20)
while [ $# -gt 0 ]; do
  case $1 in
    --post) post=$2; shift 2 ;;
    --no-post) post=""; shift ;;
    --set) sets+=("$2"); shift 2 ;;
    --title) title=(--title "$2"); shift 2 ;;
    --bench-steps) bench=(--bench-steps "$2"); shift 2 ;;
    --no-bench) bench=(); shift ;;
    -h|--help) sed -n 2,25p "$0"; exit 0 ;;
    -*) echo "study-report: unknown option $1. Fix: see scripts/study-report.sh --help" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  set -- docs/results/cpu-study sweeps/cpu-study-*
  [ ${#title[@]} -gt 0 ] || title=(--title "CPU study: Prism schedules against the uniform baseline")
fi
[ $# -ge 2 ] || { echo "study-report: give OUT_DIR and at least one SWEEP_DIR. Fix: see --help" >&2; exit 2; }
out=$1; shift
sweeps=()
for s in "$@"; do
  if [ -f "$s/sweep.yaml" ]; then sweeps+=("$s")
  else echo "study-report: $s is not a sweep directory (no sweep.yaml); skipping it" >&2; fi
done
[ ${#sweeps[@]} -gt 0 ] || { echo "study-report: nothing to report. Fix: run the sweeps first (prism sweep FILE)" >&2; exit 1; }
status=0
if [ -n "$post" ]; then
  for s in "${sweeps[@]}"; do
    # A failed step is recorded and reported; the report shows what is there.
    "$prism" sweep "$s" --post "$post" "${sets[@]}" || status=$?
  done
fi
"$prism" report "${sweeps[@]}" --out "$out" "${title[@]}" "${bench[@]}"
"$py" scripts/plot/study_report.py "$out"
echo "study-report: $out/report.md"
[ "$status" -eq 0 ] || echo "study-report: some post-processing steps failed (see above); rerun to retry them" >&2
exit "$status"
