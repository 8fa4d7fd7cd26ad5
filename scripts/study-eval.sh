#!/usr/bin/env bash
# After a study sweep: zero-shot tasks and held-out attention distance for every
# completed trial, written into each trial's run.h5 (/eval, /attention).
#   scripts/study-eval.sh SWEEP_DIR TASK_DIR [DATA_DIR]
# TASK_DIR holds the public task files (docs/analysis.md says where to get them):
#   hellaswag_val.jsonl, piqa/valid.jsonl + piqa/valid-labels.lst,
#   ARC-Easy-Test.jsonl, winogrande/dev.jsonl
# DATA_DIR: the shards whose validation split the distance is measured on
# (default: the sweep's data.dir as recorded in its first trial).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,10p "$0" >&2; exit 2; }
sweep=$1 tasks=$2 data=${3:-}
prism=${PRISM:-build/apps/prism/prism}
# "run_dir schedule" of each completed trial, from the sweep's index.
mapfile -t rows < <(scripts/sweep-runs.sh "$sweep")
[ ${#rows[@]} -gt 0 ] || { echo "study-eval: no completed trials in $sweep" >&2; exit 1; }
if [ -z "$data" ]; then
  first=${rows[0]%% *}
  data=$(awk '/^data:/{d=1;next} d&&/^ *dir:/{print $2; exit}' "$sweep/$first/config.yaml")
fi
for spec in "hellaswag hellaswag_val.jsonl" "piqa piqa/valid.jsonl --labels $tasks/piqa/valid-labels.lst" \
            "arc_easy ARC-Easy-Test.jsonl" "winogrande winogrande/dev.jsonl"; do
  set -- $spec
  task=$1 file=$2; shift 2
  [ -f "$tasks/$file" ] || { echo "study-eval: $tasks/$file missing; skipping $task (docs/analysis.md says where to get it)" >&2; continue; }
  for row in "${rows[@]}"; do
    "$prism" eval "$sweep/${row%% *}" --task "$task" --data "$tasks/$file" "$@"
  done
done
# Delta D_l per Prism schedule, against every uniform run of the sweep (seeds pooled).
uniform_runs=() schedules=()
for row in "${rows[@]}"; do
  s=${row#* }
  if [ "$s" = uniform ]; then uniform_runs+=("$sweep/${row%% *}")
  elif [[ ! " ${schedules[*]} " =~ " $s " ]]; then schedules+=("$s"); fi
done
for s in "${schedules[@]}"; do
  runs=()
  for row in "${rows[@]}"; do [ "${row#* }" = "$s" ] && runs+=("$sweep/${row%% *}"); done
  if [ ${#uniform_runs[@]} -gt 0 ]; then
    "$prism" distance "${runs[@]}" --baseline "${uniform_runs[@]}" --data "$data"
  else
    "$prism" distance "${runs[@]}" --data "$data"
  fi
done
[ ${#schedules[@]} -gt 0 ] || "$prism" distance "${uniform_runs[@]}" --data "$data"
"$prism" export "$sweep" --what eval --out "$sweep/eval.csv"
"$prism" export "$sweep" --what delta --out "$sweep/delta.csv"
echo "study-eval: wrote /eval and /attention into each run.h5, $sweep/eval.csv and $sweep/delta.csv"
