#!/usr/bin/env bash
# CI's CUDA check, on a machine with nvcc but no GPU: compiles the CUDA kernels and
# links the GPU targets against a CUDA build of LibTorch, so the CUDA path cannot
# rot; then runs the CUDA tests, which report themselves skipped (no GPU).
#
# What it builds is the PRISM_DEVICE_MINIMAL set, the same the device check builds:
# the kernels (CPU + CUDA), lib/prism/attention with the CUDA binding, the GPT model,
# test/cuda and prism-device-bench. Not the whole app: its other code has nothing
# CUDA-specific and is compiled by the CPU build, so that keeps this check cheap.
#
#   scripts/ci-cuda.sh
# Environment:
#   PRISM_CUDA_VENV       venv with a CUDA torch (default ~/.cache/prism-venv-cuda; made if missing)
#   PRISM_CUDA_TORCH      torch requirement for that venv (default torch==2.14.1, a CUDA 13.0 build)
#   PRISM_CUDA_ARCHS      GPU targets (default 90: one architecture halves nvcc's time; 80;90 is
#                         what a release build compiles, and sm_80 code differs only in arch flags)
#   PRISM_CUDA_BUILD_DIR  build directory (default build-ci-cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[ci-cuda] %s\n' "$*"; }
start=$(date +%s)

nvcc_bin=$(command -v nvcc || true)
[ -n "$nvcc_bin" ] || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "[ci-cuda] error: nvcc not found. Fix: install the CUDA toolkit's compiler (nvcc 13.x) or put it on PATH" >&2
  exit 2
}

venv=${PRISM_CUDA_VENV:-$HOME/.cache/prism-venv-cuda}
req=${PRISM_CUDA_TORCH:-torch==2.14.1}
if ! "$venv/bin/python" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then
  say "creating $venv with $req (a CUDA build of torch)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$req" > "$venv.install.log" 2>&1 \
    || { cat "$venv.install.log"; exit 1; }
fi
say "$("$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)"

build=${PRISM_CUDA_BUILD_DIR:-build-ci-cuda}
archs=${PRISM_CUDA_ARCHS:-90}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # cache hits across clones in other folders
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPRISM_DEVICE_MINIMAL=ON -DPRISM_CUDA=ON \
        -DPRISM_CUDA_ARCHS="$archs" -DPRISM_PYTHON="$venv/bin/python" > "$build.configure.log" 2>&1 \
    || { cat "$build.configure.log"; exit 1; }
fi
grep 'prism:' "$build.configure.log" 2>/dev/null | sed 's/^-- /[ci-cuda] /' || true
configured=$(date +%s)
cmake --build "$build" -j "$(nproc)"
built=$(date +%s)

# The CUDA tests run and must say they were skipped: no GPU here.
out=$("$build/prism_device_tests" "[cuda]" --use-colour no 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -m1 'SKIPPED: no CUDA device' >/dev/null || { echo "$out"; say "error: the CUDA tests did not report a skip"; exit 1; }
say "CUDA tests: $(echo "$out" | grep -c 'SKIPPED: no CUDA device') cases skipped (no GPU): $(echo "$out" | grep -m1 'SKIPPED')"
say "CUDA compile+link OK: configure $((configured - start)) s, build $((built - configured)) s, total $(( $(date +%s) - start )) s"
