#!/usr/bin/env bash
# The device check: one attempt on a lent GPU machine (an H200 with python3's torch
# 2.11+cu130, nvcc 13.0, CMake, ninja, compute-sanitizer; no package registry, none
# of our Debian libraries) that cannot waste it. Independent stages, each with its
# own time limit inside a total budget (7 minutes), each writing its result even
# when an earlier one failed:
#   0 deps         what .device/ should hold is there (MANIFEST), and the tools; a
#                  missing carried file stops everything in the first second, named
#   1 env          GPU, driver, nvcc, torch, compilers, glibc
#   2 build        the FULL prism configured against the device's torch with the
#                  libraries of .device/ (scripts/device-prepare.sh); prism-device-bench
#                  and prism_device_tests built first (-k 0), the rest of prism then in
#                  the background while the GPU stages run; the two kernel binaries from
#                  the minimal set (PRISM_DEVICE_MINIMAL) if the full build cannot give them
#   3 smoke        one small attention case, 20 s; if it fails: compute-sanitizer
#                  memcheck on it, and the kernel stages (4, 5, 6, 8) are skipped
#   4 tests        the CUDA tests on the GPU (not the CPU-emulated ones)
#   5 correctness  the kernel against float64 at every head dim up to T=4096 (out, dq,
#                  dk, dv, distance; lse through the gradients); `prism train` with backend
#                  cuda vs sdpa from the same seed (opening stage 7 instead if prism is
#                  still compiling)
#   6 bench        attention fwd / bwd / fwd+bwd, distance on and off, vs SDPA flash,
#                  each timed twice
#   7 train        GPU step efficiency: the LM-head loss paths; 124M steps Prism vs
#                  uniform (bf16), fp32 with and without TF32, micro-batch 16/32/64 with
#                  peak memory; then the full `prism`: a short CUDA run (bf16, checkpoints,
#                  --resume against an uninterrupted run, dropout on so the CUDA generator
#                  state matters), eval and distance on the GPU, tokens/s and MFU; last, a
#                  20-step mixture schedule search (prism search) on the GPU
#   8 racecheck    compute-sanitizer racecheck on the small case
#
# Here first:  scripts/device-prepare.sh           (fills the git-ignored .device/, ~22 MB)
# There:       run(command="bash scripts/device-check.sh", carry=[".device"], timeout_s=480)
#
# $OUT (default ./build-device-out) receives at most 8 files:
#   results.jsonl  one JSON object per line: a {"stage": ...} line per stage (status pass |
#                  fail | timeout | skip, rc, seconds, limit_s, note) and the measurements
#                  ({"bench": "check" | "attention" | "loss" | "train" | "peak" | "run", ...})
#   summary.md     the stage table and the measurements (also printed last)
#   env.txt  build.log  tests.log  bench.log  train.log  sanitizer.log
# Exit code: 0 when every stage passed.
#
# Knobs (rehearsals, CI; the defaults are the device's):
#   PRISM_DEVICE_BUDGET_S   total seconds (default 420)
#   PRISM_DEVICE_LIMITS     per-stage limits, e.g. "build=1800,tests=60"
#   PRISM_DEVICE_STAGES     the stages to run, e.g. "deps,env,build" (the others: skip)
#   PRISM_DEVICE_INJECT     stage=pass|fail|hang,...: replaces a stage's work (rehearsal)
#   PRISM_DEVICE_DIR        the carried folder (default .device)
#   PRISM_PYTHON            Python with torch (default python3)
#   PRISM_DEVICE_BUILD_DIR  (default build-device)   PRISM_DEVICE_JOBS (default nproc)
#   PRISM_CUDA_ARCHS        (default 90)
#   PRISM_DEVICE_BENCH  PRISM_DEVICE_TESTS_BIN  PRISM_DEVICE_PRISM   binaries instead of the built ones
#   PRISM_COMPUTE_SANITIZER (default compute-sanitizer)
set -uo pipefail
cd "$(dirname "$0")/.."
export root=$PWD
start=$(date +%s)
budget=${PRISM_DEVICE_BUDGET_S:-420}
# The stages end 10 s before the budget does (1 s for short rehearsal budgets): room for the summary.
deadline=$((start + budget - (budget >= 60 ? 10 : 1)))
export OUT=${OUT:-$root/build-device-out}
mkdir -p "$OUT"
export results="$OUT/results.jsonl"
: > "$results"
abs() { [[ $1 == /* ]] && echo "$1" || echo "$root/$1"; }
export dev; dev=$(abs "${PRISM_DEVICE_DIR:-.device}")
export py=${PRISM_PYTHON:-python3}
export build; build=$(abs "${PRISM_DEVICE_BUILD_DIR:-build-device}")
export jobs=${PRISM_DEVICE_JOBS:-$(nproc)}
export archs=${PRISM_CUDA_ARCHS:-90}
export sanitizer=${PRISM_COMPUTE_SANITIZER:-compute-sanitizer}
export work=$build-work
export bench=${PRISM_DEVICE_BENCH:-$build/apps/device_bench/prism-device-bench}
export tests_bin=${PRISM_DEVICE_TESTS_BIN:-$build/prism_device_tests}
export prism=${PRISM_DEVICE_PRISM:-$build/apps/prism/prism}
mkdir -p "$work"
rm -f "$build"/prism.{pid,rc,rc.tmp,recorded} "$work/compare-deferred"  # state of an earlier run
stages=(deps env build smoke tests correctness bench train racecheck)
# Limits per stage; the budget caps the sum (expected on an H200: build ~110 s with the rest of
# prism compiling behind stages 3-6, the others 5-85 s each).
declare -A limit=([deps]=5 [env]=20 [build]=200 [smoke]=20 [memcheck]=45 [tests]=40 [correctness]=45
                  [bench]=40 [train]=100 [racecheck]=30)
overall=0

say() { printf '[device-check %4ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }
left() { echo $(( deadline - $(date +%s) )); }
knob() { tr ',' '\n' <<< "${1:-}" | sed -n "s/^$2=//p" | tail -1; }  # knob "k=v,..." KEY
for s in "${!limit[@]}"; do v=$(knob "${PRISM_DEVICE_LIMITS:-}" "$s"); [ -n "$v" ] && limit[$s]=$v; done
selected() { [ -z "${PRISM_DEVICE_STAGES:-}" ] || tr ',' '\n' <<< "$PRISM_DEVICE_STAGES" | grep -qx "$1"; }
# prism compiles behind the GPU stages when one of them will use it; else in the build stage.
export prism_build=background
selected correctness || selected train || prism_build=foreground

json_str() {  # a JSON string literal of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/ }; s=${s//$'\r'/}
  printf '"%s"' "$s"
}
# record STAGE STATUS RC SECONDS LIMIT NOTE: one stage line; anything but a pass fails the check.
record() {
  printf '{"stage": %s, "status": %s, "rc": %d, "seconds": %d, "limit_s": %d, "note": %s}\n' \
    "$(json_str "$1")" "$(json_str "$2")" "$3" "$4" "$5" "$(json_str "$6")" >> "$results"
  # A stage left out on purpose (PRISM_DEVICE_STAGES) does not fail the check; any other non-pass does.
  [ "$2" = pass ] || [[ "$6" == "not selected"* ]] || overall=1
  say "$1: $2 (rc $3, $4 s, limit $5 s) $6"
}
# step_record WHAT OK VALUE NOTE: a measurement line for a step inside a stage.
step_record() {
  printf '{"bench": "run", "what": %s, "ok": %s, "value": %s, "note": %s}\n' "$(json_str "$1")" "$2" \
    "$(json_str "$3")" "$(json_str "$4")" >> "$results"
}
# sub SECONDS CMD...: one step of a stage body under its own limit. --foreground keeps it in
# the stage's process group, so the stage's own timeout still reaches it.
sub() { local lim=$1; shift; timeout --foreground --kill-after=3 "$lim" "$@"; }
export -f json_str step_record sub

# stage_limit N: N seconds or what is left of the budget if less; 0 when nothing is left
# (the caller then skips the stage: `timeout 0` would mean no limit at all).
stage_limit() { local l; l=$(left); (( l > $1 )) && l=$1; (( l > 0 )) && echo "$l" || echo 0; }

# stage NAME LOG FUNCTION [ARGS]: runs a stage body (an exported function) under `timeout`
# (TERM to its whole process group at the limit, KILL 5 s later), unless the stage is not
# selected, is injected (PRISM_DEVICE_INJECT) or the budget is spent; records the result.
# Sets stage_rc (125: did not run).
stage() {
  local name=$1 log=$2; shift 2
  stage_rc=125
  if ! selected "$name"; then record "$name" skip 0 0 0 "not selected (PRISM_DEVICE_STAGES)"; return; fi
  local lim; lim=$(stage_limit "${limit[$name]}")
  if (( lim <= 0 )); then record "$name" skip 0 0 0 "budget spent (${budget} s)"; return; fi
  local inj; inj=$(knob "${PRISM_DEVICE_INJECT:-}" "$name")
  local t0; t0=$(date +%s)
  echo "=== $name (limit $lim s) ===" >> "$log"
  case "$inj" in
    pass) echo "injected pass" >> "$log"; stage_rc=0 ;;
    fail) timeout --kill-after=5 "$lim" bash -c 'echo "injected failure"; exit 1' >> "$log" 2>&1; stage_rc=$? ;;
    hang) timeout --kill-after=5 "$lim" sleep 100000 >> "$log" 2>&1; stage_rc=$? ;;
    *) timeout --kill-after=5 "$lim" bash -c '"$@"' _ "$@" >> "$log" 2>&1; stage_rc=$? ;;
  esac
  local dt=$(( $(date +%s) - t0 )) st=pass note
  (( stage_rc == 0 )) || st=fail
  if (( stage_rc == 124 || stage_rc == 137 )); then st=timeout; note="killed at its limit (see $(basename "$log"))"
  else note=$(grep -v '^===' "$log" | tail -n 1 | cut -c1-240); fi
  record "$name" "$st" "$stage_rc" "$dt" "$lim" "$note${inj:+ [injected: $inj]}"
}

summary() {
  "$py" "$root/scripts/device-summary.py" "$results" "$OUT/summary.md" "$(( $(date +%s) - start ))" "$budget" \
    > /dev/null 2>&1 || { echo "# Device check (no Python for the tables)"; cat "$results"; } > "$OUT/summary.md"
  cat "$OUT/summary.md"
}
finish() {
  # A prism build still running in the background has no one left to use it.
  if [ -f "$build/prism.pid" ] && [ ! -f "$build/prism.rc" ]; then
    kill -TERM -- "-$(cat "$build/prism.pid")" 2>/dev/null
    say "stopped the background prism build (still compiling at the end)"
  fi
  summary
  say "done: overall rc $overall; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
  exit "$overall"
}

# ---------------------------------------------------------------------------------------
# Stage bodies. Each is a function run in its own bash under `timeout`, so every variable
# it reads is exported above and every function it calls is exported below.

env_report() {
  echo "date: $(date -u)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -n 2
  "$py" -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "python", sys.version.split()[0])' 2>&1
  g++ --version 2>&1 | head -1
  cmake --version 2>&1 | head -1
  echo "glibc $(getconf GNU_LIBC_VERSION 2>&1 | awk '{print $2}'); ninja: $(command -v ninja || echo none); pkg-config: $(command -v pkg-config || echo none); compute-sanitizer: $(command -v "$sanitizer" || echo none); cores: $(nproc)"
  echo ".device: $(head -1 "$dev/MANIFEST" 2>/dev/null)"
  grep '^needs ' "$dev/MANIFEST" 2>/dev/null
}

# The full configure; then, in the foreground, what the kernel stages need (prism-device-bench
# and prism_device_tests, on prism_device_lib: the kernels, attention and the model), and in
# the background the rest of prism (its result in $build/prism.rc; await_prism waits for it),
# so the GPU stages start while it compiles. If the full configure or those two targets fail,
# the same two come from the minimal build (PRISM_DEVICE_MINIMAL) instead.
build_all() {
  local gen=() full=ok
  command -v ninja >/dev/null && gen=(-G Ninja)
  local common=(-DCMAKE_BUILD_TYPE=Release -DPRISM_CUDA=ON -DPRISM_CUDA_ARCHS="$archs" -DPRISM_CUDA_PTXAS_VERBOSE=ON
                -DPRISM_PYTHON="$(command -v "$py")")
  rm -f "$build/prism.rc"
  echo "--- configure (full, libraries from $dev/prism-deps.cmake)"
  if cmake -C "$dev/prism-deps.cmake" -S "$root" -B "$build" "${gen[@]}" "${common[@]}"; then
    echo "--- build prism-device-bench prism_device_tests (-k 0, $jobs jobs)"
    cmake --build "$build" -j "$jobs" --target prism-device-bench prism_device_tests -- -k 0 || full="kernel targets failed"
    if [ "$prism_build" = foreground ]; then  # no GPU stage follows that could use the time
      echo "--- build prism (-k 0, $jobs jobs)"
      local t=$SECONDS
      cmake --build "$build" -j "$jobs" --target prism -- -k 0 || full="prism failed"
      echo "$([ -x "$prism" ] && [ "$full" = ok ] && echo 0 || echo 1) $((SECONDS - t))" > "$build/prism.rc"
    else
      echo "--- build prism in the background ($(( jobs > 2 ? jobs - 2 : 1 )) jobs, niced), appended below"
      # setsid: out of this stage's process group, so the stage's limit does not end it; the
      # check's end does (finish). prism.pid: the session's leader, so `kill -- -PID` ends the
      # whole build; prism.rc: "rc seconds".
      setsid bash -c 'echo $$ > "$1/prism.pid"; t=$SECONDS
                      nice -n 10 cmake --build "$1" -j "$2" --target prism -- -k 0 >> "$3" 2>&1
                      echo "$? $((SECONDS - t))" > "$1/prism.rc.tmp" && mv "$1/prism.rc.tmp" "$1/prism.rc"' \
        _ "$build" "$(( jobs > 2 ? jobs - 2 : 1 ))" "$OUT/build.log" < /dev/null > /dev/null 2>&1 &
    fi
  else
    full="configure failed"
    mkdir -p "$build" && echo "1 0" > "$build/prism.rc"
  fi
  if [ ! -x "$bench" ] || [ ! -x "$tests_bin" ]; then
    echo "--- the minimal set (PRISM_DEVICE_MINIMAL) for the kernel stages, in $build-min"
    cmake -S "$root" -B "$build-min" "${gen[@]}" "${common[@]}" -DPRISM_DEVICE_MINIMAL=ON \
      -DPRISM_CATCH2_INCLUDE_DIR="$dev/root/usr/include" \
      && cmake --build "$build-min" -j "$jobs" -- -k 0
    link_built "$bench" "$build-min/apps/device_bench/prism-device-bench"
    link_built "$tests_bin" "$build-min/prism_device_tests"
  fi
  local got="" rc=0
  for t in "$bench" "$tests_bin"; do if [ -x "$t" ]; then got+=" $(basename "$t")"; else rc=1; fi; done
  [ "$full" = ok ] || rc=1  # the kernel stages may still run on the minimal build's binaries
  local state="building in the background"
  [ "$full" = "configure failed" ] && state="not built"
  [ "$prism_build" = foreground ] && state=$([ -x "$prism" ] && echo built || echo "not built")
  echo "full build: $full; kernel binaries:${got:- none}; prism: $state"
  return $rc
}

# await_prism: waits for the background prism build while this stage's limit lasts, records
# its result once, and is true when prism is there. A prism given as PRISM_DEVICE_PRISM
# (not built here) is there at once.
await_prism() {
  local t0=$SECONDS rc secs
  if [ ! -f "$build/prism.pid" ] && [ ! -f "$build/prism.rc" ]; then
    [ -x "$prism" ] && return 0
    echo "prism is not being built (the build stage did not run)"; return 1
  fi
  while [ ! -f "$build/prism.rc" ]; do sleep 1; done
  read -r rc secs < "$build/prism.rc"
  if [ ! -f "$build/prism.recorded" ]; then
    touch "$build/prism.recorded"
    step_record "build prism (in the background, from the build stage on)" "$([ "$rc" = 0 ] && echo true || echo false)" \
      "${secs} s, rc ${rc}" "this stage waited $(( SECONDS - t0 )) s for it"
  fi
  [ "$rc" = 0 ] && [ -x "$prism" ] || { echo "the prism build failed (rc $rc; build.log)"; return 1; }
}
# prism_ready: true when the background build has already succeeded (no waiting).
prism_ready() { [ -f "$build/prism.rc" ] || { [ ! -f "$build/prism.pid" ] && [ -x "$prism" ]; }; }

link_built() {  # link_built WANTED BUILT: WANTED points at BUILT when only BUILT exists
  [ -x "$1" ] || [ ! -x "$2" ] || { mkdir -p "$(dirname "$1")" && ln -sf "$2" "$1"; }
}
smoke() { "$bench" smoke; }
memcheck() { "$sanitizer" --tool memcheck --error-exitcode 9 "$bench" smoke --small; }
racecheck() { "$sanitizer" --tool racecheck --error-exitcode 9 "$bench" smoke --small; }
cuda_tests() {
  "$tests_bin" "[cuda]~[emulated]" --use-colour no --durations yes
  local rc=$?
  if grep -q 'SKIPPED: no CUDA device' "$OUT/tests.log"; then echo "SKIPPED: no GPU seen by the tests"; return 1; fi
  return $rc
}

# Tiny shards from the carried text, once.
shards() {
  [ -f "$work/shards/prepare.json" ] && return 0
  sub 30 "$prism" data prepare "$dev/text" -o "$work/shards" --vocab "$dev/gpt2.tiktoken" --val-tokens 32768 --force
}

# compare_curves NAME A B FROM: max |loss_A - loss_B| over steps >= FROM, as a measurement.
compare_curves() {
  "$py" - "$1" "$2" "$3" "$4" "$results" <<'EOF'
import h5py, json, sys
name, a, b, first, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def curve(d):
    with h5py.File(d + "/run.h5", "r") as f:
        return {int(s): float(l) for s, l in zip(f["train/step"][:], f["train/loss"][:])}
ca, cb = curve(a), curve(b)
steps = sorted(s for s in ca if s in cb and s >= first)
diffs = [abs(ca[s] - cb[s]) for s in steps]
rec = {"bench": "run", "what": name, "ok": bool(steps) and max(diffs) < 0.05, "steps": len(steps),
       "value": f"max |dloss| {max(diffs) if diffs else float('nan'):.2e} over steps {steps[0] if steps else '-'}-{steps[-1] if steps else '-'}",
       "max_abs_diff": max(diffs) if diffs else None, "first_step_diff": diffs[0] if diffs else None,
       "note": f"{a.split('/')[-1]} vs {b.split('/')[-1]}"}
open(out, "a").write(json.dumps(rec) + "\n")
print(rec["what"], rec["value"])
sys.exit(0 if rec["ok"] else 1)
EOF
}

# `prism train` with backend cuda against sdpa from the same seed (dropout 0: the kernel has none).
train_backends() {
  shards || return 1
  local rc=0 b
  for b in cuda sdpa; do
    rm -rf "$work/cmp-$b"
    sub 25 "$prism" train "$root/experiments/cpu-prism.yaml" model.preset=cpu-256 model.dropout=0 data.dir="$work/shards" \
      train.device=cuda train.dtype=bf16 train.batch_size=16 train.seq_len=256 train.tokens_per_step=0 \
      train.max_steps=30 train.warmup_steps=5 train.lr=1e-3 train.eval_every=0 train.eval_tokens=8192 \
      train.distance_every=0 train.checkpoint_every=0 train.log_every=10 attention.backend=$b \
      --out "$work/cmp-$b" || rc=1
  done
  (( rc == 0 )) && compare_curves "train loss: attention cuda vs sdpa, same seed" "$work/cmp-cuda" "$work/cmp-sdpa" 1
}

# The kernel against float64; the trainer on both back ends if prism is built by now, else
# that comparison opens stage 7 (no GPU time spent waiting for the compiler here).
correctness() {
  local rc=0
  sub 30 "$bench" check --json "$results" || rc=1
  if prism_ready; then
    await_prism && train_backends || rc=1
  else
    touch "$work/compare-deferred"
    echo "prism is still compiling: the trainer's cuda vs sdpa comparison runs first in stage 7"
  fi
  return $rc
}

attention_bench() { "$bench" attention --repeat 2 --json "$results"; }

# GPU step efficiency, then the full prism: train (bf16, checkpoints, resume), eval, distance.
train_stage() {
  local rc=0 backend=${1:-auto}
  sub 15 "$bench" loss --repeat 2 --json "$results" || rc=1
  sub 20 "$bench" train --backend "$backend" --json "$results" || rc=1
  sub 15 "$bench" train --backend "$backend" --schedules uniform --batches 32,64 --steps 4 --json "$results" || rc=1
  sub 15 "$bench" train --backend "$backend" --schedules uniform --dtype fp32 --tf32 on,off --steps 3 --json "$results" || rc=1
  await_prism || { step_record "full prism run" false "" "prism was not built (build.log)"; return 1; }
  if [ -f "$work/compare-deferred" ]; then train_backends || rc=1; fi
  shards || { step_record "tiny shards" false "" "prism data prepare failed"; return 1; }
  local args=(model.dropout=0.1 data.dir="$work/shards" train.device=cuda train.dtype=bf16 train.batch_size=8
              train.seq_len=1024 train.tokens_per_step=0 train.warmup_steps=2 train.eval_every=10 train.eval_tokens=16384
              train.distance_every=10 train.distance_batch=4 train.checkpoint_every=10 train.log_every=5
              attention.backend="$backend")
  rm -rf "$work/run-a" "$work/run-b"
  # A: 20 steps, checkpoints at 10 and 20. B: A's run at its step-10 checkpoint, resumed to 20.
  # Dropout 0.1 draws from the CUDA generator: its state must come back from the checkpoint.
  if sub 35 "$prism" train "$root/experiments/prism-124m.yaml" "${args[@]}" train.max_steps=20 --out "$work/run-a"; then
    step_record "train 124M Prism, 20 steps (bf16, checkpoints at 10 and 20)" true \
      "$(grep -o '[0-9.]*[kM]* tok/s' "$OUT/train.log" | tail -1)" "attention $backend, dropout 0.1"
  else step_record "train 124M Prism, 20 steps" false "" "see train.log"; rc=1; fi
  mkdir -p "$work/run-b/checkpoints" \
    && cp -r "$work/run-a/config.yaml" "$work/run-a/run.h5" "$work/run-b/" \
    && cp -r "$work/run-a/checkpoints/step_000010" "$work/run-b/checkpoints/" \
    && echo step_000010 > "$work/run-b/checkpoints/latest" \
    && sub 30 "$prism" train --resume "$work/run-b" train.max_steps=20 \
    && compare_curves "resume on GPU: step 10's checkpoint resumed to 20 vs the run itself" "$work/run-a" "$work/run-b" 11 \
    || { step_record "resume on GPU" false "" "see train.log"; rc=1; }
  "$py" "$root/scripts/device-summary.py" --mfu "$work/run-a" "$results" || rc=1
  # Analysis on the GPU with the kernel (its telemetry gives distance), or without it when the smoke launch failed.
  local eval_backend=cuda dist_backend=cuda
  [ "$backend" = auto ] || { eval_backend=$backend; dist_backend=reference; }
  sub 20 "$prism" eval "$work/run-a" --task hellaswag --data "$root/test/fixtures/hellaswag.jsonl" \
    --vocab "$dev/gpt2.tiktoken" --device cuda --backend "$eval_backend" --no-store \
    && step_record "eval on the GPU (hellaswag fixture)" true "" "--device cuda --backend $eval_backend" \
    || { step_record "eval on the GPU" false "" "see train.log (needs prism eval --device/--backend)"; rc=1; }
  sub 20 "$prism" distance "$work/run-a" --data "$work/shards" --tokens 16384 --seq-len 1024 --batch 4 --device cuda \
    --backend "$dist_backend" --out "$work/distance.h5" \
    && step_record "distance on the GPU" true "" "--device cuda --backend $dist_backend" \
    || { step_record "distance on the GPU" false "" "see train.log (needs prism distance --device/--backend)"; rc=1; }
  # Last (a stage timeout loses only this): a mixture schedule search on the GPU, 20 steps at cpu-128,
  # a small ranking (issue 32 asks for every back end; on the CPU the tests run each one).
  rm -rf "$work/search"
  sub 20 "$prism" search "$root/experiments/search/cpu-128.yaml" search.method=mixture data.dir="$work/shards" \
    train.device=cuda train.dtype=bf16 train.threads=1 attention.backend="$eval_backend" train.max_steps=20 \
    train.warmup_steps=2 train.eval_every=10 train.eval_tokens=16384 train.checkpoint_every=10 search.rank.batches=2 \
    search.rank.probes=16 search.rank.probe_batches=1 search.rank.candidates=2 search.rank.progress_probes=0 \
    --out "$work/search" \
    && step_record "schedule search on the GPU (mixture, 20 steps, cpu-128)" true "" "attention $eval_backend" \
    || { step_record "schedule search on the GPU" false "" "see train.log"; rc=1; }
  return $rc
}

export -f env_report build_all await_prism prism_ready link_built smoke memcheck racecheck cuda_tests shards compare_curves \
  train_backends correctness attention_bench train_stage

# ---------------------------------------------------------------------------------------
# 0. deps: the carried files (sizes from MANIFEST) and the tools, in the first second.
deps_missing() {
  local missing=() need
  if [ ! -f "$dev/MANIFEST" ]; then
    missing+=("$dev/MANIFEST (run scripts/device-prepare.sh here, then carry [\"$dev\"])")
  else
    # One find for all files, one awk to compare: the whole check takes well under a second.
    local bad
    bad=$(find "$dev" -type f -printf '%P %s\n' | awk -v dev="$dev" '
      NR == FNR { have[$1] = $2; next }
      $1 == "file" { if (!($2 in have)) print dev "/" $2; else if (have[$2] != $3) print dev "/" $2 " (size " have[$2] ", expected " $3 ")" }' \
      - "$dev/MANIFEST")
    [ -z "$bad" ] || mapfile -t -O "${#missing[@]}" missing <<< "$bad"
  fi
  command -v "$py" >/dev/null || missing+=("$py (set PRISM_PYTHON to the Python with torch)")
  for need in cmake nvcc g++ timeout; do command -v "$need" >/dev/null || missing+=("$need (not on PATH)"); done
  (( ${#missing[@]} == 0 )) || { echo "missing: ${missing[*]}"; return 1; }
  echo "$(grep -c '^file ' "$dev/MANIFEST") carried files present; $py, cmake, nvcc, g++ on PATH"
}
if selected deps; then
  t0=$(date +%s)
  if [ "$(knob "${PRISM_DEVICE_INJECT:-}" deps)" = fail ]; then note="missing: $dev/INJECTED [injected: fail]"; rc=1
  else note=$(deps_missing); rc=$?; fi
  if (( rc != 0 )); then
    record deps fail "$rc" $(( $(date +%s) - t0 )) "${limit[deps]}" "$note"
    say "Fix: run scripts/device-prepare.sh on the development machine, carry [\"$dev\"], and run again"
    for (( i = 1; i < ${#stages[@]}; i++ )); do record "${stages[$i]}" skip 0 0 0 "deps failed"; done
    finish
  fi
  record deps pass 0 $(( $(date +%s) - t0 )) "${limit[deps]}" "$note"
else
  record deps skip 0 0 0 "not selected (PRISM_DEVICE_STAGES)"
fi

# 1-2. Environment, build ------------------------------------------------------------------
for f in env.txt build.log tests.log bench.log train.log sanitizer.log; do : > "$OUT/$f"; done
stage env "$OUT/env.txt" env_report
stage build "$OUT/build.log" build_all
(( stage_rc == 0 )) || { say "the end of build.log:"; tail -n 30 "$OUT/build.log"; }

# 3. Smoke: if the kernel cannot run one small case, memcheck it and skip what needs it --------
stage smoke "$OUT/sanitizer.log" smoke
kernel_ok=1
if (( stage_rc != 0 && stage_rc != 125 )); then  # 125: not run (not selected, or no budget)
  kernel_ok=0
  if [ -x "$bench" ] && selected smoke; then
    lim=$(stage_limit "${limit[memcheck]}")
    if (( lim > 0 )); then
      t0=$(date +%s)
      echo "=== memcheck (limit $lim s) ===" >> "$OUT/sanitizer.log"
      timeout --kill-after=5 "$lim" bash -c memcheck >> "$OUT/sanitizer.log" 2>&1
      rc=$?
      say "memcheck after the failed smoke launch: rc $rc ($(( $(date +%s) - t0 )) s); the end of sanitizer.log:"
      tail -n 20 "$OUT/sanitizer.log"
      printf '{"bench": "memcheck", "rc": %d, "seconds": %d, "note": %s}\n' "$rc" $(( $(date +%s) - t0 )) \
        "$(json_str "$(grep -m1 -E 'ERROR SUMMARY|Invalid|error' "$OUT/sanitizer.log" | cut -c1-200)")" >> "$results"
    fi
  fi
fi
kernel_stage() {  # kernel_stage NAME LOG FUNCTION: a stage that needs the kernel
  if (( kernel_ok )); then stage "$@"; else record "$1" skip 0 0 0 "the smoke launch failed (memcheck ran: sanitizer.log)"; fi
}

# 4-8 --------------------------------------------------------------------------------------
kernel_stage tests "$OUT/tests.log" cuda_tests
kernel_stage correctness "$OUT/train.log" correctness
kernel_stage bench "$OUT/bench.log" attention_bench
if (( kernel_ok )); then stage train "$OUT/train.log" train_stage auto
else stage train "$OUT/train.log" train_stage sdpa; fi
kernel_stage racecheck "$OUT/sanitizer.log" racecheck
finish
