#!/usr/bin/env bash
# After a study sweep: the zero-shot tasks and held-out attention distance (with
# Delta D_l against the uniform trial of the same seed) of every trial that
# completed its budget, written into each trial's run.h5 (/eval, /attention):
# `prism sweep SWEEP_DIR --post experiments/study/post/paper.yaml` with the task files'
# folder, skipping the tasks whose files are missing. Resumable; add
# --launcher slurm (after the arguments) to run one Slurm array task per trial.
#   scripts/study-eval.sh SWEEP_DIR TASK_DIR [DATA_DIR] [prism sweep options...]
# TASK_DIR holds the public task files (docs/analysis.md says where to get them):
#   hellaswag_val.jsonl, piqa/valid.jsonl + piqa/valid-labels.lst,
#   ARC-Easy-Test.jsonl, winogrande/dev.jsonl
# DATA_DIR: the shards whose validation split the distance is measured on
# (default: each trial's data.dir).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,14p "$0" >&2; exit 2; }
sweep=$1 tasks=$2; shift 2
data=""
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then data=$1; shift; fi
prism=${PRISM:-build/apps/prism/prism}
overrides=("task_dir=$tasks")
[ -z "$data" ] || overrides+=("distance.data=$data")
for spec in "hellaswag hellaswag_val.jsonl" "piqa piqa/valid.jsonl" "arc_easy ARC-Easy-Test.jsonl" \
            "winogrande winogrande/dev.jsonl"; do
  set -- $spec "$@"
  task=$1 file=$2; shift 2
  if [ ! -f "$tasks/$file" ]; then
    echo "study-eval: $tasks/$file missing; skipping $task (docs/analysis.md says where to get it)" >&2
    overrides+=("~tasks.$task")
  fi
done
exec "$prism" sweep "$sweep" --post experiments/study/post/paper.yaml "${overrides[@]}" "$@"
