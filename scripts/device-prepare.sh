#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for scripts/device-check.sh, which runs on a lent
# GPU machine that has LibTorch (python3's torch), nvcc and CMake but no package
# registry and none of our Debian libraries. Beyond LibTorch, the GPU targets
# (PRISM_DEVICE_MINIMAL) need only Catch2 v2's single header; fmt comes header-only
# from LibTorch's own copy. Nothing compiled here is carried: binaries built on this
# machine may need a newer glibc than that machine has, so everything is built there.
#
#   scripts/device-prepare.sh                 fill .device/
#   scripts/device-prepare.sh --check [PY]    ... then configure and build the minimal
#                                             set here against PY's torch (default: .venv)
#                                             and run its tests (they skip without a GPU)
# Produces:
#   .device/include/catch2/catch.hpp    from Debian's catch2 .deb (apt-get download), or the installed copy
#   .device/MANIFEST                    each file, where it came from, its sha256
# Then, on the device:  run(command="bash scripts/device-check.sh", carry=[".device"])
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[device-prepare] %s\n' "$*"; }
die() { printf '[device-prepare] error: %s\n' "$*" >&2; exit 1; }

dest=.device
rm -rf "$dest/include" "$dest/MANIFEST"
mkdir -p "$dest/include/catch2"

# 1. Catch2 v2 single header --------------------------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
origin=""
if (cd "$tmp" && apt-get download catch2 >/dev/null 2>&1) && ls "$tmp"/catch2_*.deb >/dev/null 2>&1; then
  deb=$(ls "$tmp"/catch2_*.deb | head -1)
  dpkg-deb -x "$deb" "$tmp/x"
  [ -f "$tmp/x/usr/include/catch2/catch.hpp" ] || die "$(basename "$deb") has no usr/include/catch2/catch.hpp"
  cp "$tmp/x/usr/include/catch2/catch.hpp" "$dest/include/catch2/"
  origin="Debian package $(basename "$deb")"
elif [ -f /usr/include/catch2/catch.hpp ]; then
  cp /usr/include/catch2/catch.hpp "$dest/include/catch2/"
  origin="installed /usr/include/catch2/catch.hpp (catch2 $(dpkg-query -W -f='${Version}' catch2 2>/dev/null || echo '?'))"
else
  die "no Catch2 v2 header: apt-get download catch2 failed and /usr/include/catch2/catch.hpp is absent. Fix: apt-get install catch2"
fi
major=$(sed -n 's/^#define CATCH_VERSION_MAJOR \([0-9]*\).*/\1/p' "$dest/include/catch2/catch.hpp")
[ "$major" = 2 ] || die "catch.hpp is Catch2 v$major; the tests use the v2 single header"
version=$(sed -n 's/^#define CATCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$dest/include/catch2/catch.hpp" | paste -sd.)

{
  echo "# .device/: carried to the GPU machine by run(carry=[\".device\"]); made by scripts/device-prepare.sh on $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "include/catch2/catch.hpp  Catch2 $version  from $origin  sha256 $(sha256sum "$dest/include/catch2/catch.hpp" | cut -d' ' -f1)"
} > "$dest/MANIFEST"
say "wrote $dest/ ($(du -sh "$dest" | cut -f1)):"
sed 's/^/  /' "$dest/MANIFEST"

# 2. Optional check: the minimal build configures, compiles and runs here ------------
if [ "${1:-}" = "--check" ]; then
  py=${2:-.venv/bin/python}
  build=build-device-check
  say "checking the PRISM_DEVICE_MINIMAL build against $py's torch in $build/"
  rm -rf "$build"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DPRISM_DEVICE_MINIMAL=ON -DPRISM_PYTHON="$py" \
        -DPRISM_CATCH2_INCLUDE_DIR="$PWD/$dest/include" > "$build.configure.log" 2>&1 \
    || { cat "$build.configure.log"; die "configure failed"; }
  # Proof that no Debian library was asked for: none of their CMake variables exist.
  if grep -E '^(yaml-cpp_DIR|Boost_DIR|HDF5_|nlohmann_json_DIR|PCRE2_)' "$build/CMakeCache.txt"; then
    die "the minimal configure looked for a Debian library"
  fi
  grep 'prism:' "$build.configure.log" | sed 's/^/  /'
  cmake --build "$build" -j "${PRISM_JOBS:-2}"
  "$build/prism_device_tests" "[cuda]" --use-colour no | tail -n 3
  say "minimal build OK"
fi
