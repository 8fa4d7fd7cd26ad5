#!/usr/bin/env bash
# Sets up a fresh Debian machine to build and test Prism; idempotent: a second
# run only checks. Steps: Debian packages -> Python venv (.venv) -> GPT-2 vocabulary
# and the default corpus (data/cache/) -> CMake configure (build/).
#   scripts/setup.sh            everything
#   PRISM_BUILD_DIR=dir         configure another build directory (default: build)
#   CMAKE_PREFIX_PATH=/libtorch use your own LibTorch 2.x instead of the venv's torch
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${PRISM_BUILD_DIR:-build}

say() { printf '[setup] %s\n' "$*"; }

# 1. Debian packages ---------------------------------------------------------
pkgs=(build-essential cmake ninja-build ccache pkg-config python3-venv
      libyaml-cpp-dev libfmt-dev libboost-program-options-dev libhdf5-dev
      catch2 libpcre2-dev nlohmann-json3-dev
      zlib1g-dev libzstd-dev  # gzip and zstd JSONL corpora (prism data prepare)
      libhwy-dev    # Google Highway: the fused CPU attention kernel's portable SIMD with runtime dispatch
      libgloo-dev   # gloo headers for c10d data parallelism (the symbols come from LibTorch)
      clang libclang-rt-dev  # the sanitize preset and the fuzzers (ASan, UBSan, libFuzzer)
      iproute2)     # network namespaces for the two-host data-parallel test
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages: all ${#pkgs[@]} present"
fi

# 2. Python venv ---------------------------------------------------------------
req=scripts/requirements.txt
stamp=.venv/.prism-requirements
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
if ! cmp -s "$req" "$stamp" 2>/dev/null; then
  say "installing Python packages from $req"
  .venv/bin/pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
else
  say "Python packages: up to date ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
fi

# 3. Vocabulary and default corpus (data/cache/, ignored by git; idempotent) ---
bash data/get-vocab.sh
bash data/get-corpus.sh

# 4. CMake ---------------------------------------------------------------------
if [ -f "$build/CMakeCache.txt" ]; then
  say "CMake: $build/ already configured"
else
  say "configuring CMake in $build/"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
say "done. Build: cmake --build $build -j$(nproc)"
