#!/usr/bin/env bash
# CI's sanitizer + fuzz stage: builds every libFuzzer harness (fuzz/) with clang,
# ASan and UBSan, replays the committed inputs of fuzz/corpus/ (the findings kept as
# regressions), then fuzzes each harness for a fixed time from seeds made of real
# files. Fails on any finding (crash, sanitizer report, leak, timeout, out-of-memory).
#   scripts/ci-fuzz.sh                  each harness 20 s (CI's smoke)
#   PRISM_FUZZ_SECONDS=1800 scripts/ci-fuzz.sh config shard   longer, chosen harnesses
#   PRISM_FUZZ_SEED=0 ...               a random libFuzzer seed (default 1: CI's runs repeat)
# Only the `fuzzers` target is built (the harnesses compile the reader sources they
# need; prism_lib is not built), in the `sanitize` preset's build-sanitize/
# (PRISM_SANITIZE_BUILD_DIR). Seeds with a real checkpoint and run.h5 come from a
# tiny run of the release build's prism (PRISM_BINARY, default build/apps/prism/prism,
# which CI's test stage has built); without it those two harnesses start from the
# other seeds. The corpus grows in BUILD/fuzz-corpus/<harness>/ across runs; findings
# land in BUILD/fuzz-findings/. A finding is fixed, and its input kept in
# fuzz/corpus/<harness>/ with a regression test (fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PRISM_SANITIZE_BUILD_DIR:-build-sanitize}
seconds=${PRISM_FUZZ_SECONDS:-20}
# libFuzzer's random seed: fixed for CI, so that a run on one commit explores the same inputs
# in the same order (a faster machine only goes further along them) and a finding reproduces;
# PRISM_FUZZ_SEED=0 lets libFuzzer pick one (longer campaigns).
fuzz_seed=${PRISM_FUZZ_SEED:-1}
prism=${PRISM_BINARY:-build/apps/prism/prism}
all=(config shard safetensors tiktoken tokenizer tasks run_h5 jsonl parquet)
harnesses=("$@")
((${#harnesses[@]})) || harnesses=("${all[@]}")
say() { printf '[fuzz] %s\n' "$*"; }

command -v clang++ >/dev/null || { say "error: no clang++. Fix: run scripts/setup.sh (it installs clang and libclang-rt-dev)"; exit 2; }
start=$(date +%s)
[ -f "$build/CMakeCache.txt" ] || cmake --preset sanitize -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzzers
built=$(date +%s)
say "built the harnesses in $((built - start)) s"
seeds="$build/fuzz-seeds"
rm -rf "$seeds"
bash fuzz/make-seeds.sh "$seeds" "$prism"
mkdir -p "$build/fuzz-findings"

# run_h5 runs without leak detection: Debian's HDF5 1.10 loses memory inside itself on
# damaged files (object headers it fails to decode; afterwards it cannot even close the
# library), so a leak there says nothing about Prism. Crashes, ASan and UBSan reports
# and escaped exceptions still count (fuzz/README.md, Findings).
leaks_of() { if [ "$1" = run_h5 ]; then echo 0; else echo 1; fi; }

# Whether a finding's report stops first in HDF5's own code: the first stack frame of the
# report (a sanitizer's, or a timeout's) that is not the sanitizer's or libFuzzer's own, or
# libc's signal frame, lies in libhdf5. Debian's HDF5 1.10 does not
# check what it reads from a global heap (where variable-length strings live, unchecksummed),
# so a damaged run.h5 can crash inside it (fuzz/README.md, Findings): recorded, with its
# input, but not a failure of Prism's code.
# A Prism function that appears 3 or more times in that stack makes it Prism's whatever the
# first frame: Prism's own recursion or loop drives HDF5 there (a cycle of group links kept
# the reader walking through HDF5's path code until the timeout; fuzz/README.md).
in_hdf5() {
  awk '/ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer: timeout)|runtime error:/ {if (on) exit; on = 1; next}
       on && /^ *#[0-9]+ / {
         if (first == "" && !/__interceptor_|__asan|__sanitizer|__ubsan|_sanitizer_common|fuzzer::|\/libc\.so/)
           first = ($0 ~ /libhdf5/) ? "hdf5" : "other"
         if (match($0, / in prism::[^(]*/)) if (++seen[substr($0, RSTART + 4, RLENGTH - 4)] >= 3) recursion = 1 }
       END { exit (on && first == "hdf5" && !recursion) ? 0 : 1 }' "$1"
}

failed=()
hdf5=()  # harnesses stopped by a finding inside HDF5 (in_hdf5)
# The committed inputs first, each run once: a regression shows here by name.
for h in "${harnesses[@]}"; do
  shopt -s nullglob
  kept=(fuzz/corpus/"$h"/*)
  shopt -u nullglob
  ((${#kept[@]})) || continue
  log="$build/fuzz-findings/$h-replay.log"
  if ASAN_OPTIONS="detect_leaks=$(leaks_of "$h")" "$build/fuzz/prism_fuzz_$h" -detect_leaks="$(leaks_of "$h")" -timeout=20 -rss_limit_mb=4096 "${kept[@]}" >"$log" 2>&1; then
    say "$h: the ${#kept[@]} kept input(s) of fuzz/corpus/$h/ replay clean"
  else
    failed+=("$h")
    say "$h: a kept input of fuzz/corpus/$h/ fails again; log: $log"
    grep -E 'ERROR|SUMMARY|prism-fuzz|Running:' "$log" | tail -n 8 | sed 's/^/[fuzz]   /'
  fi
done

for h in "${harnesses[@]}"; do
  corpus="$build/fuzz-corpus/$h"
  mkdir -p "$corpus"
  args=(-max_total_time="$seconds" -seed="$fuzz_seed" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1
        -artifact_prefix="$build/fuzz-findings/$h-")
  [ -f "fuzz/dict/$h.dict" ] && args+=(-dict="fuzz/dict/$h.dict")
  log="$build/fuzz-findings/$h.log"
  set +e
  ASAN_OPTIONS="detect_leaks=$(leaks_of "$h")" "$build/fuzz/prism_fuzz_$h" -detect_leaks="$(leaks_of "$h")" "${args[@]}" "$corpus" "$seeds/$h" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED|pulse|NEW|REDUCE)' "$log" | tail -n1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || echo "cov: ? ft: ?")
  if [ $rc -ne 0 ] && [ "$h" = run_h5 ] && in_hdf5 "$log"; then
    where=$(grep -m1 -oE 'ERROR: [A-Za-z]+: [a-z-]+' "$log" | sed 's/^ERROR: //' || echo "a report")
    hdf5+=("$h")
    say "$h: HDF5's own crash on a damaged file after $runs runs ($cov): $where in $(grep -m1 -oE ' in H5[A-Za-z0-9_]+' "$log" | sed 's/ in //' || echo HDF5), not Prism's code (fuzz/README.md); input and log in $build/fuzz-findings/"
  elif [ $rc -ne 0 ]; then
    failed+=("$h")
    say "$h: FINDING after $runs runs ($cov); log: $log"
    grep -E 'ERROR|SUMMARY|prism-fuzz|Test unit written' "$log" | head -n 8 | sed 's/^/[fuzz]   /'
  else
    say "$h: $runs runs in ${seconds} s, $cov, corpus $(ls "$corpus" | wc -l) inputs, no finding"
  fi
done
wall="stage wall time $(( $(date +%s) - start )) s (build $((built - start)) s)"
if ((${#failed[@]})); then
  say "findings in: ${failed[*]} (inputs in $build/fuzz-findings/), $wall. Fix: reproduce with $build/fuzz/prism_fuzz_NAME FILE"
  exit 1
fi
early=""
((${#hdf5[@]})) && early=" (stopped early by a finding inside HDF5: ${hdf5[*]})"
say "all ${#harnesses[@]} harnesses clean of findings in Prism's code$early, $wall"
