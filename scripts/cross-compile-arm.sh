#!/usr/bin/env bash
# Compiles the fused CPU attention kernel (kernels/cpu, LibTorch-free) for
# AArch64 with Debian's cross compiler, to show that its NEON and SVE code
# paths (every Highway target of the architecture) build without warnings.
# Nothing runs: this machine has no Arm CPU.
#   scripts/cross-compile-arm.sh        needs g++-aarch64-linux-gnu and libhwy-dev
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[cross-compile-arm] %s\n' "$*"; }
cxx=aarch64-linux-gnu-g++
command -v "$cxx" >/dev/null || { say "error: $cxx not found. Fix: apt-get install g++-aarch64-linux-gnu"; exit 2; }
[ -f /usr/include/hwy/highway.h ] || { say "error: Highway headers not found. Fix: apt-get install libhwy-dev"; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Highway's headers are architecture-independent; the cross compiler's sysroot lacks /usr/include.
mkdir -p "$out/include" && ln -s /usr/include/hwy "$out/include/hwy"
for f in kernels/cpu/*.cpp; do
  case $f in */attention_no_simd.cpp) continue ;; esac
  say "$f"
  "$cxx" -std=c++17 -O3 -Wall -Wextra -Werror -fopenmp -Ikernels -I"$out/include" -c "$f" -o "$out/$(basename "$f" .cpp).o"
done
targets=$(aarch64-linux-gnu-nm -C "$out/attention_simd.o" | grep -o 'simd::N_[A-Z0-9_]*::forward' | sed 's/simd::N_//; s/::forward//' | sort -u | paste -sd' ')
say "ok: every kernel TU compiles for aarch64; code paths in attention_simd.o: $targets"
