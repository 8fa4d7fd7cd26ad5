#!/usr/bin/env bash
# CI's sanitizer stage: builds the `sanitize` preset (clang; ASan + UBSan on every
# target, build-sanitize/) and runs the sanitized test subset. A report from either
# sanitizer fails the test that caused it (halt_on_error; test/sanitizers/ holds the
# few suppressions of LibTorch's own reports, each justified).
#   scripts/ci-sanitize.sh              the subset CI runs (PRISM_SANITIZE_TESTS)
#   scripts/ci-sanitize.sh -L model     any ctest selection instead
# Environment:
#   PRISM_SANITIZE_TESTS   ctest label regex of the subset (default below: every tag but the
#                          slow end-to-end ones, which the plain suite runs; see README's Testing)
#   PRISM_SANITIZE_BUILD_DIR  build directory (default build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[ci-sanitize] %s\n' "$*"; }
build=${PRISM_SANITIZE_BUILD_DIR:-build-sanitize}
subset=${PRISM_SANITIZE_TESTS:-'^(config|schedule|data|store|eval|analysis|attention|model|fuzz|ddp)$'}
command -v clang++ >/dev/null || { say "error: no clang++. Fix: run scripts/setup.sh (it installs clang)"; exit 2; }
start=$(date +%s)
[ -f "$build/CMakeCache.txt" ] || cmake --preset sanitize -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target prism prism_tests
built=$(date +%s)
say "built in $((built - start)) s"
if (($#)); then
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
else
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -L "$subset"
fi
say "sanitized tests passed in $(( $(date +%s) - built )) s (build $((built - start)) s)"
