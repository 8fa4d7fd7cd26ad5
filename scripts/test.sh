#!/usr/bin/env bash
# Builds Prism and runs every test (ctest over the Catch2 cases).
#   scripts/test.sh                 all tests
#   scripts/test.sh -L model        only tests tagged [model] (Catch2 tags are ctest labels;
#                                   a selection that matches no test fails)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PRISM_BUILD_DIR:-build}
[ -f "$build/CMakeCache.txt" ] || { echo "[test] $build/ is not configured. Fix: run scripts/setup.sh first" >&2; exit 2; }
jobs=$(nproc)
start=$(date +%s)
cmake --build "$build" -j"$jobs"
built=$(date +%s)
ctest --test-dir "$build" --no-tests=error --output-on-failure -j"$jobs" "$@"
echo "[test] build $((built - start)) s, tests $(( $(date +%s) - built )) s"
