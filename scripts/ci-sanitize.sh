#!/usr/bin/env bash
# Tests under ASan + UBSan: the `sanitize` preset (clang, build-sanitize/, shared with
# scripts/ci-fuzz.sh). A report from either sanitizer fails the test that caused it
# (halt_on_error; test/sanitizers/ holds the few suppressions, each justified).
#   scripts/ci-sanitize.sh                 CI's subset: prism_core_tests, every test of
#                                          prism_core's folders (config, schedule, data) and
#                                          the layout check, on prism_core alone. CLI steps
#                                          inside them run the release build's prism (build/,
#                                          from the test stage). Then everything else is
#                                          compiled and linked with clang, not run: prism_lib,
#                                          prism and prism_tests (what GCC accepts and clang
#                                          refuses, e.g. a structured binding captured in a
#                                          lambda, fails CI; ~9 min cold on 2 cores, seconds
#                                          with a warm ccache, which --full shares).
#   scripts/ci-sanitize.sh --full          the whole suite sanitized: every test of prism_tests on
#                                          the clang build of all of prism_lib (~20 min of tests
#                                          after the build on 2 cores: docs/development.md, Testing); run by hand
#   scripts/ci-sanitize.sh --full -L model any ctest selection of the whole suite (Catch2 tags are
#                                          ctest labels; a selection that matches nothing fails)
# Environment:
#   PRISM_SANITIZE_TESTS      --full's ctest label regex, e.g. '^(model|attention)$' (default: every test)
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
  select=()
  [ -z "${PRISM_SANITIZE_TESTS:-}" ] || select=(-L "$PRISM_SANITIZE_TESTS")
  # prism_core_tests too: its ctest entries (the sanitized- subset, excluded below) would
  # otherwise stand as a NOT_BUILT placeholder that fails.
  cmake --build "$build" -j"$(nproc)" --target prism prism_tests prism_core_tests
  built=$(date +%s)
  say "built in $((built - start)) s"
  if (($#)); then
    ctest --test-dir "$build" --no-tests=error --output-on-failure -j"$(nproc)" -E '^sanitized-' "$@"
  else
    ctest --test-dir "$build" --no-tests=error --output-on-failure -j"$(nproc)" "${select[@]}" -E '^sanitized-'
  fi
  say "sanitized tests passed in $(( $(date +%s) - built )) s (build $((built - start)) s)"
else
  prism=$(sed -n 's/^PRISM_CORE_TESTS_PRISM:FILEPATH=//p' "$build/CMakeCache.txt")
  [ -x "$prism" ] || { say "error: $prism (the release build's prism, for the CLI steps) is missing. Fix: scripts/setup.sh && scripts/test.sh first, or configure $build with -DPRISM_CORE_TESTS_PRISM=/path/to/prism"; exit 2; }
  cmake --build "$build" -j"$(nproc)" --target prism_core_tests
  built=$(date +%s)
  say "built prism_core_tests in $((built - start)) s"
  ctest --test-dir "$build" --no-tests=error --output-on-failure -j"$(nproc)" -R '^sanitized-'
  t=$(date +%s)
  say "sanitized tests passed in $((t - built)) s (build $((built - start)) s)"
  say "clang build of prism_lib, prism and prism_tests (compiled and linked, not run: C++17 as clang reads it)"
  cmake --build "$build" -j"$(nproc)" --target prism prism_tests
  say "clang build of everything in $(( $(date +%s) - t )) s"
fi
