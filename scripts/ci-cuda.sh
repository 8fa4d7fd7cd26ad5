#!/usr/bin/env bash
# CI's CUDA check, on a machine with nvcc but no GPU: the FULL prism (CLI, trainer,
# data-parallel code with its NCCL branch, CUDA kernels), prism-device-bench and the
# CUDA tests, compiled and linked against a CUDA build of LibTorch exactly as the
# device check builds them on a lent GPU machine: scripts/device-check.sh's own
# deps/env/build stages, with the libraries from .device/ (scripts/device-prepare.sh)
# and nothing from the system. Then everything runs up to the first GPU call:
#   - the build used .device's headers and archives only (depfiles, link lines)
#   - process_group.cpp was compiled with ProcessGroupNCCL (PRISM_HAVE_NCCL)
#   - the CUDA tests report themselves skipped (no GPU)
#   - `prism train train.device=cuda` starts, then stops with the clear "no CUDA device" error
#   - prism-device-bench stops with "no CUDA device visible"
#
#   scripts/ci-cuda.sh
# Environment:
#   PRISM_CUDA_VENV       venv with a CUDA torch (default ~/.cache/prism-venv-cuda; made if missing)
#   PRISM_CUDA_TORCH      torch requirement for that venv (default torch==2.14.1, a CUDA 13.0 build)
#   PRISM_CUDA_ARCHS      GPU targets (default 90, as on the device: one architecture halves nvcc's
#                         time; 80;90 is what a release build compiles)
#   PRISM_CUDA_BUILD_DIR  build directory (default build-ci-cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[ci-cuda] %s\n' "$*"; }
fail() { printf '[ci-cuda] error: %s\n' "$*" >&2; exit 1; }
start=$(date +%s)

nvcc_bin=$(command -v nvcc || true)
[ -n "$nvcc_bin" ] || [ -x /usr/local/cuda/bin/nvcc ] || \
  fail "nvcc not found. Fix: install the CUDA toolkit's compiler (nvcc 13.x) or put it on PATH"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

venv=${PRISM_CUDA_VENV:-$HOME/.cache/prism-venv-cuda}
req=${PRISM_CUDA_TORCH:-torch==2.14.1}
if ! "$venv/bin/python" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then
  say "creating $venv with $req (a CUDA build of torch)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$req" > "$venv.install.log" 2>&1 \
    || { cat "$venv.install.log"; exit 1; }
fi
say "$("$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)"

# The carried libraries, as for the device (apt-get download; nothing installed).
if [ ! -f .device/MANIFEST ] || [ scripts/device-prepare.sh -nt .device/MANIFEST ]; then
  bash scripts/device-prepare.sh
fi
prepared=$(date +%s)

build=${PRISM_CUDA_BUILD_DIR:-build-ci-cuda}
out=$build-out
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # cache hits across clones in other folders
# No budget to speak of here (2 cores): the device's limits are for the device.
OUT=$out PRISM_PYTHON="$venv/bin/python" PRISM_DEVICE_BUILD_DIR="$build" PRISM_DEVICE_STAGES=deps,env,build \
  PRISM_CUDA_ARCHS="${PRISM_CUDA_ARCHS:-90}" PRISM_DEVICE_BUDGET_S=5400 PRISM_DEVICE_LIMITS=build=5300 \
  bash scripts/device-check.sh > "$out.log" 2>&1 || { cat "$out.log"; tail -n 60 "$out/build.log"; fail "the device build failed (above)"; }
built=$(date +%s)
grep -E '^\[device-check' "$out.log" | sed 's/^/  /'

prism=$build/apps/prism/prism
bench=$build/apps/device_bench/prism-device-bench
tests=$build/prism_device_tests
grep -q 'prism: CUDA back end for architectures' "$out/build.log" || fail "the build has no CUDA back end (build.log)"

# NCCL: found (here in the pip wheel nvidia-nccl-cu13) and compiled in.
grep -m1 'prism: NCCL for multi-GPU training' "$out/build.log" | sed 's/^-- /[ci-cuda] /' \
  || fail "configure did not enable NCCL (build.log); this CUDA LibTorch has it"
dist_cmd=$(grep -m1 'train/process_group.cpp' < <(ninja -C "$build" -t commands prism))
[[ "$dist_cmd" == *PRISM_HAVE_NCCL=1* ]] || fail "process_group.cpp was compiled without PRISM_HAVE_NCCL"
dist_obj=$(find "$build" -name 'process_group.cpp.o' | head -1)
# Not `nm | grep -q`: under pipefail, grep -q's early exit fails nm with SIGPIPE on a large symbol table.
grep -q 'c10d::ProcessGroupNCCL::ProcessGroupNCCL' < <(nm -C "$dist_obj") \
  || fail "$dist_obj does not construct c10d::ProcessGroupNCCL"
say "NCCL branch compiled: $dist_obj constructs c10d::ProcessGroupNCCL"

# Nothing from the system's -dev packages: every header and archive came from .device/.
# Anchored: .device's own copies live under .device/root/usr/include/... too.
sys_headers=$(ninja -C "$build" -t deps | grep -oE '^ +/usr/include/(boost|yaml-cpp|hdf5|nlohmann|gloo|catch2|pcre2|fmt|hwy)[^ :]*' \
  | sort -u | head -5 || true)
[ -z "$sys_headers" ] || fail "system headers were used instead of .device's: $sys_headers"
sys_libs=$(ninja -C "$build" -t commands prism | grep -oE '(^| )/usr/lib/x86_64-linux-gnu/lib(yaml-cpp|hdf5|boost|pcre2|sz|aec|hwy)[^ ]*' | sort -u || true)
[ -z "$sys_libs" ] || fail "system libraries were linked instead of .device's: $sys_libs"
# At run time: no -dev library at all, and of .device's only libhwy.so.1 (Highway ships no
# archive), found there through the build tree's RUNPATH, as on the device.
ldd "$prism" | grep -E 'yaml|hdf5|boost|pcre2|\.device' | grep -vE "^\s*libhwy\.so\.1 => $PWD/\.device/" \
  && fail "prism loads a carried or system -dev library at run time (only .device's libhwy.so.1 may be)"
hwy_at=$(ldd "$prism" | awk '$1 == "libhwy.so.1" {print $3}')
[[ "$hwy_at" == "$PWD/.device/"* ]] || fail "prism should load Highway from .device (as on the device), not '${hwy_at:-nothing}'"
say "only .device's headers, static archives and libhwy.so.1 were used; prism loads $hwy_at and no other"

# Up to the first GPU call.
out_tests=$("$tests" "[cuda]" --use-colour no 2>&1) || { echo "$out_tests"; fail "prism_device_tests failed"; }
grep -q 'SKIPPED: no CUDA device' <<< "$out_tests" || { echo "$out_tests"; fail "the CUDA tests did not report a skip"; }
say "CUDA tests: $(echo "$out_tests" | grep -c 'SKIPPED: no CUDA device') cases skipped (no GPU)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$prism" data prepare .device/text -o "$work/shards" --vocab .device/gpt2.tiktoken --val-tokens 20000 > "$work/prepare.log" 2>&1 \
  || { cat "$work/prepare.log"; fail "prism data prepare failed"; }
set +e
msg=$("$prism" train experiments/prism-124m.yaml data.dir="$work/shards" train.device=cuda --out "$work/run" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] && [[ "$msg" == *"no CUDA device is available"* ]] \
  || { echo "$msg"; fail "prism train train.device=cuda should stop at the GPU request with a clear error (rc $rc)"; }
say "prism train on CUDA reaches the GPU request: $(echo "$msg" | grep -m1 'no CUDA device')"
set +e
msg=$("$bench" smoke 2>&1)
rc=$?
set -e
[ $rc -eq 3 ] && [[ "$msg" == *"no CUDA device visible"* ]] || { echo "$msg"; fail "prism-device-bench smoke: expected rc 3 without a GPU, got $rc"; }
say "prism-device-bench reaches the GPU request: $msg"
say "CUDA compile+link OK: .device $((prepared - start)) s, build $((built - prepared)) s, total $(( $(date +%s) - start )) s"
