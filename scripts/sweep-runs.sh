#!/usr/bin/env bash
# The completed trials of a sweep, one "RUN_DIR SCHEDULE" line each (RUN_DIR below
# SWEEP_DIR, SCHEDULE "uniform" or the compact form), from its summary.csv. With
# successive halving only the last rung's runs are "completed" (the others are
# "pruned"), so these are the runs at the full budget.
#   scripts/sweep-runs.sh SWEEP_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:?SWEEP_DIR}
[ -f "$sweep/summary.csv" ] || { echo "sweep-runs: $sweep/summary.csv not found. Fix: run (or --collect) the sweep first" >&2; exit 2; }
"${PRISM_PYTHON:-.venv/bin/python}" - "$sweep/summary.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["status"] == "completed":
        print(r["run_dir"], r["schedule"])
PY
