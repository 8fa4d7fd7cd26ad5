#!/usr/bin/env bash
# The device check: proves the CUDA attention kernel on a lent GPU machine (an H200
# with python3's torch 2.11+cu130, nvcc 13.0, CMake; no package registry, none of
# our Debian libraries) within 8 minutes:
#   1. builds the GPU pieces (PRISM_DEVICE_MINIMAL, sm_90) against that machine's torch
#   2. runs the CUDA tests (kernel vs float64 attention math on the GPU)
#   3. times the kernel against SDPA flash: d_h 64/128/256, T 1024/4096, bf16, fwd and fwd+bwd
#   4. times 124M-shape training steps, Prism 3x3,6x3,12x6 vs uniform 12x12 (back end auto, then sdpa)
# Here first:   bash scripts/device-prepare.sh        (fills the git-ignored .device/)
# Then:         run(command="bash scripts/device-check.sh", carry=[".device"], timeout_s=540)
#
# Writes to $OUT (default ./build-device-out), at most 8 files:
#   summary.md     verdict table per stage and the measurements (also printed last)
#   results.jsonl  one JSON object per line, "bench" is env | build | tests | attention | train:
#                  attention: d_h T B H dtype mode prism_ms sdpa_flash_ms prism_over_flash_time
#                             prism_tflops sdpa_flash_tflops out_rel_diff error
#                  train:     model schedule heads attention_backend requested_backend batch T
#                             ms_per_step tokens_per_s throughput_vs_uniform final_loss error
#                  env/build/tests: stage, rc, seconds, and what the stage saw
#   env.txt        GPU, driver, nvcc, torch, compiler, CMake
#   build.log      configure and build, with ptxas's registers/shared memory/spills per kernel
#   tests.log      the Catch2 output of the CUDA tests
#   bench.log      prism-device-bench's output
# Exit code: 0 when every stage passed.
# Dry run on a machine without a GPU (the stages after the build then fail visibly):
#   PRISM_DEVICE_BUDGET_S=3600 PRISM_DEVICE_BUILD_S=3000 OUT=/tmp/out bash scripts/device-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
deadline=$((start + ${PRISM_DEVICE_BUDGET_S:-465}))  # 8 minutes, less a margin for the summary
OUT=${OUT:-$PWD/build-device-out}  # git-ignored (/build*) when $OUT is unset
mkdir -p "$OUT"
results="$OUT/results.jsonl"
: > "$results"
jobs=$(nproc)
build=${PRISM_DEVICE_BUILD_DIR:-build-device}
overall=0

say() { printf '[device-check %4ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }
left() { echo $(( deadline - $(date +%s) )); }
# stage_limit N: N seconds, or what is left of the budget if less.
stage_limit() { local l; l=$(left); (( l < $1 )) && echo "$l" || echo "$1"; }
record() {  # record STAGE RC SECONDS NOTE
  local note=${4//\\/\\\\}; note=${note//\"/\\\"}
  printf '{"bench": "%s", "rc": %d, "seconds": %d, "note": "%s"}\n' "$1" "$2" "$3" "$note" >> "$results"
}

# 0. Environment -------------------------------------------------------------------------
py=$(command -v python3 || true)
{
  echo "date: $(date -u)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -n 2
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' 2>&1
  g++ --version 2>&1 | head -1
  cmake --version 2>&1 | head -1
  echo "ninja: $(command -v ninja || echo none)  cores: $jobs  python: $py"
  echo ".device: $(cat .device/MANIFEST 2>/dev/null | tail -n +2 || echo 'missing: run scripts/device-prepare.sh and carry .device')"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
record env 0 0 "$(grep -m1 '^torch' "$OUT/env.txt")"

# 1. Build --------------------------------------------------------------------------------
say "building the GPU targets in $build/ ($jobs jobs)"
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
(
  set -e
  timeout "$(stage_limit 60)" cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DPRISM_DEVICE_MINIMAL=ON -DPRISM_CUDA=ON -DPRISM_CUDA_ARCHS=90 -DPRISM_CUDA_PTXAS_VERBOSE=ON \
    -DPRISM_PYTHON="$py" -DPRISM_CATCH2_INCLUDE_DIR="$PWD/.device/include"
  timeout "$(stage_limit "${PRISM_DEVICE_BUILD_S:-300}")" cmake --build "$build" -j "$jobs"
) > "$OUT/build.log" 2>&1
rc=$?
record build "$rc" $(( $(date +%s) - t0 )) "$(grep -m1 'prism: device-minimal' "$OUT/build.log" | sed 's/^-- //')"
if (( rc != 0 )); then
  say "BUILD FAILED (rc $rc); the end of build.log:"
  tail -n 40 "$OUT/build.log"
  overall=1
else
  say "built in $(( $(date +%s) - t0 )) s"
fi

# 2. CUDA tests ---------------------------------------------------------------------------
if (( rc == 0 )); then
  say "CUDA tests"
  t0=$(date +%s)
  timeout "$(stage_limit 150)" "$build/prism_device_tests" "[cuda]" --use-colour no --durations yes > "$OUT/tests.log" 2>&1
  trc=$?
  tline=$(grep -E '^(All tests passed|test cases:)' "$OUT/tests.log" | tail -1)
  grep -q 'SKIPPED: no CUDA device' "$OUT/tests.log" && { tline="SKIPPED (no GPU seen): $tline"; trc=1; }
  record tests "$trc" $(( $(date +%s) - t0 )) "$tline"
  say "tests rc $trc: $tline"
  (( trc == 0 )) || { overall=1; grep -B2 -A12 -E 'FAILED|REQUIRE|CHECK\(' "$OUT/tests.log" | head -n 60; }

  # 3-4. Benchmarks ---------------------------------------------------------------------
  bench="$build/apps/device_bench/prism-device-bench"
  : > "$OUT/bench.log"
  for args in "attention" "train --backend auto" "train --backend sdpa"; do
    lim=$(stage_limit 120)
    (( lim > 20 )) || { say "no time left for: $args"; record "$args" 124 0 "skipped: budget spent"; overall=1; continue; }
    say "bench $args"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$lim" "$bench" $args --json "$results" >> "$OUT/bench.log" 2>&1
    brc=$?
    (( brc == 0 )) || { overall=1; say "bench $args rc $brc"; record "$args" "$brc" $(( $(date +%s) - t0 )) "rc $brc (see bench.log)"; }
  done
fi

# Summary ---------------------------------------------------------------------------------
"$py" - "$results" "$OUT/summary.md" "$(( $(date +%s) - start ))" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
f = lambda x, spec=".3f": "n/a" if x is None else format(x, spec)
out = [f"# Device check ({sys.argv[3]} s)", ""]
out += ["| stage | rc | seconds | note |", "|---|---|---|---|"]
out += [f"| {r['bench']} | {r['rc']} | {r['seconds']} | {r['note']} |" for r in rows if "rc" in r]
att = [r for r in rows if r["bench"] == "attention" and "mode" in r]
if att:
    out += ["", "Attention, bf16, causal: Prism CUDA kernel vs SDPA flash (time ratio < 1: Prism faster)", "",
            "| d_h | T | B | H | mode | prism ms | flash ms | prism/flash | prism TFLOP/s | out rel diff |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in att:
        out.append(f"| {r['d_h']} | {r['T']} | {r['B']} | {r['H']} | {r['mode']} | {f(r['prism_ms'])} | "
                   f"{f(r['sdpa_flash_ms'])} | {f(r['prism_over_flash_time'], '.2f')} | {f(r['prism_tflops'], '.1f')} | "
                   f"{f(r['out_rel_diff'], '.1e')} |" + (f" {r['error']}" if r.get("error") else ""))
tr = [r for r in rows if r["bench"] == "train" and "schedule" in r]
if tr:
    out += ["", "Training throughput, gpt2-124m, T 1024, bf16 autocast, AdamW", "",
            "| requested | used | schedule | heads | ms/step | tokens/s | vs uniform |", "|---|---|---|---|---|---|---|"]
    for r in tr:
        out.append(f"| {r['requested_backend']} | {r['attention_backend']} | {r['schedule']} | {r['heads']} | "
                   f"{f(r['ms_per_step'], '.1f')} | {f(r['tokens_per_s'], '.0f')} | {f(r['throughput_vs_uniform'])} |"
                   + (f" {r['error']}" if r.get("error") else ""))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
say "done: overall rc $overall; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit "$overall"
