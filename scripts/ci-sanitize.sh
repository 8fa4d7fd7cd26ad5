#!/usr/bin/env bash
# Tests under ASan + UBSan: the `sanitize` preset (clang, build-sanitize/, shared with
# scripts/ci-fuzz.sh). A report from either sanitizer fails the test that caused it
# (halt_on_error; test/sanitizers/ holds the few suppressions, each justified).
#   scripts/ci-sanitize.sh                 CI's subset: prism_core_tests, every test of
#                                          prism_core's folders (config, schedule, data) and
#                                          the layout check, on prism_core alone (no LibTorch
#                                          to compile: minutes). CLI steps inside them run the
#                                          release build's prism (build/, from the test stage).
#   scripts/ci-sanitize.sh --full          the whole suite's sanitized subset (PRISM_SANITIZE_TESTS):
#                                          all of prism_lib and the tests again with clang, more
#                                          than CI's hour on 2 cores; run by hand
#   scripts/ci-sanitize.sh --full -L model any ctest selection of the whole suite
# Environment:
#   PRISM_SANITIZE_TESTS      --full's ctest label regex (default below: every tag but the slow
#                             end-to-end ones, which the plain suite runs; docs/development.md, Testing)
#   PRISM_SANITIZE_BUILD_DIR  build directory (default build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[ci-sanitize] %s\n' "$*"; }
build=${PRISM_SANITIZE_BUILD_DIR:-build-sanitize}
command -v clang++ >/dev/null || { say "error: no clang++. Fix: run scripts/setup.sh (it installs clang)"; exit 2; }
start=$(date +%s)
[ -f "$build/CMakeCache.txt" ] || cmake --preset sanitize -B "$build" >/dev/null
if [ "${1:-}" = "--full" ]; then
  shift
  subset=${PRISM_SANITIZE_TESTS:-'^(config|schedule|data|store|eval|analysis|attention|model|fuzz|ddp)$'}
  cmake --build "$build" -j"$(nproc)" --target prism prism_tests
  built=$(date +%s)
  say "built in $((built - start)) s"
  if (($#)); then
    ctest --test-dir "$build" --no-tests=error --output-on-failure -j"$(nproc)" -E '^sanitized-' "$@"
  else
    ctest --test-dir "$build" --no-tests=error --output-on-failure -j"$(nproc)" -L "$subset" -E '^sanitized-'
  fi
else
  prism=$(sed -n 's/^PRISM_CORE_TESTS_PRISM:FILEPATH=//p' "$build/CMakeCache.txt")
  [ -x "$prism" ] || { say "error: $prism (the release build's prism, for the CLI steps) is missing. Fix: scripts/setup.sh && scripts/test.sh first, or configure $build with -DPRISM_CORE_TESTS_PRISM=/path/to/prism"; exit 2; }
  cmake --build "$build" -j"$(nproc)" --target prism_core_tests
  built=$(date +%s)
  say "built prism_core_tests in $((built - start)) s"
  ctest --test-dir "$build" --no-tests=error --output-on-failure -j"$(nproc)" -R '^sanitized-'
fi
say "sanitized tests passed in $(( $(date +%s) - built )) s (build $((built - start)) s)"
