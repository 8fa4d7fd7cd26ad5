#!/usr/bin/env bash
# The report of every fine-tuned depth-2 search (evidence.md and its CSVs in this folder), from the
# committed inputs. Builds searches/: for each fine-tuned search, its files from ../inputs/ (search.yaml,
# ranking.csv, config.yaml) with its fine-tuning sweep from inputs/ft-V-METHODN as finetune/, the
# layout `prism search --ground-truth` reads (RUN/finetune/summary.csv); variant V is part of the name.
# Then judges them beside the shared-weights searches. PRISM: the prism binary (default build/apps/prism/prism).
#   bash docs/results/search-cpu/depth2/finetune/report.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prism=${PRISM:-$here/../../../../../build/apps/prism/prism}
cd "$here/.."
S=finetune/searches
rm -rf "$S"
mkdir -p "$S"
add() {  # METHOD N VARIANT
  local from=finetune/inputs/ft-$3-$1$2 d=$S/search-d2-$1-seed$2-ft$3
  [ -f "$from/summary.csv" ] || return 0
  mkdir -p "$d/finetune"
  cp inputs/search-d2-$1-seed$2/{search.yaml,ranking.csv,config.yaml} "$d/"
  cp "$from/summary.csv" "$from/sweep.yaml" "$d/finetune/"
}
for v in C H; do
  for n in 3 4 5 6 7 8; do add mixture $n $v; add spos $n $v; done
done
retrained=(inputs/search-picks-depth2 finetune/inputs/ft-picks)
for d in finetune/inputs/ft-H-picks*; do [ -d "$d" ] && retrained+=("$d"); done
"$prism" search --ground-truth inputs/search-ground-truth-depth2 \
  --searches inputs/search-d2-{spos,mixture}-seed{0,1,2,3,4,5} inputs/search-d2-mixture-seed{6,7,8} "$S"/* \
  --retrained "${retrained[@]}" --halving inputs/search-halving-depth2 --report finetune
