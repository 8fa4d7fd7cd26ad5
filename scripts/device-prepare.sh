#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for scripts/device-check.sh, which runs on a lent
# GPU machine: python3 with torch (2.11+cu130 there), nvcc 13, CMake and ninja, but
# no package registry and none of our Debian libraries. This fetches the -dev
# packages the FULL prism needs with `apt-get download` (nothing is installed here)
# and lays them out so CMake finds them there through one initial-cache file:
#
#   .device/root/usr/...        the packages' files, Debian layout
#     yaml-cpp, Boost.Program_options, HDF5 C/C++ (serial), PCRE2, zlib, libaec/libsz:
#                               static archives (.a) only, so nothing carried is loaded
#                               at run time and no glibc symbol version binds here
#     Boost:                    only the headers prism's own sources include (every
#                               `#include <boost/...>` of lib/, apps/, kernels/ and test/) and
#                               theirs (the closure under g++, C++17 and C++20), plus boost/config
#     fmt, nlohmann-json, Catch2 v2, gloo:  headers and CMake configs
#     Highway (the fused CPU kernel's SIMD): headers, CMake config and libhwy.so.1, the
#                               one shared library carried (Debian ships no archive; 39 KB,
#                               needs GLIBC 2.14 / GLIBCXX 3.4.21); prism finds it through
#                               the build tree's RUNPATH
#     pkgconf:                  used only when the device has no pkg-config
#   .device/prism-deps.cmake    `cmake -C .device/prism-deps.cmake ...`: every package's
#                               location, relative to itself (the tree moves)
#   .device/bin/pkg-config      pkg-config over .device's .pc files only
#   .device/gpt2.tiktoken       the vocabulary (data/get-vocab.sh), for data prepare and eval
#   .device/text/               a few Austen chapters (data/get-corpus.sh), for tiny shards
#   .device/MANIFEST            each carried file with its size and sha256; each package
#                               with its version; the GLIBC/GLIBCXX versions its binaries need
#
#   scripts/device-prepare.sh           fill .device/ (about 20 MB; the carry limit is 64 MiB)
#   scripts/device-prepare.sh --check   ... then configure the full build against .venv's
#                                       torch with only .device's libraries (no build)
# Then, on the device: run(command="bash scripts/device-check.sh", carry=[".device"])
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[device-prepare] %s\n' "$*"; }
die() { printf '[device-prepare] error: %s\n' "$*" >&2; exit 1; }

dest=.device
arch=x86_64-linux-gnu
packages=(libyaml-cpp-dev libfmt-dev libboost1.74-dev libboost-program-options1.74-dev libhdf5-dev
          libpcre2-dev zlib1g-dev libaec-dev nlohmann-json3-dev catch2 libgloo-dev pkgconf-bin libpkgconf3
          libhwy-dev libhwy1)
command -v apt-get >/dev/null || die "apt-get not found. Fix: run this on a Debian/Ubuntu machine (the one CI runs on)"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found. Fix: apt-get install dpkg"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say "fetching ${#packages[@]} packages with apt-get download"
(cd "$tmp" && apt-get download "${packages[@]}" > "$tmp/apt.log" 2>&1) || {
  cat "$tmp/apt.log" >&2
  die "apt-get download failed. Fix: run 'apt-get update' (as root), check the network, then rerun"
}
for p in "${packages[@]}"; do
  deb=$(ls "$tmp"/"${p}"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || die "apt-get download gave no .deb for $p. Fix: apt-get update, or check that this is Debian 12 / Ubuntu"
  dpkg-deb -x "$deb" "$tmp/x"
done

rm -rf "$dest/root" "$dest/bin" "$dest/include" "$dest/text" "$dest/prism-deps.cmake" "$dest/MANIFEST"
mkdir -p "$dest/root/usr/lib/$arch/cmake" "$dest/root/usr/include" "$dest/bin"
x=$tmp/x/usr
r=$dest/root/usr
L=lib/$arch
copy() {  # copy SRC... into DIR (real files: the carry keeps no links)
  local dir=${*: -1}
  mkdir -p "$dir"
  cp -rL "${@:1:$#-1}" "$dir/"
}

# Headers and CMake configs.
copy "$x/include/yaml-cpp" "$x/include/fmt" "$x/include/nlohmann" "$x/include/catch2" "$x/include/gloo" "$x/include/hwy" \
     "$x/include/pcre2.h" "$x/include/zlib.h" "$x/include/zconf.h" "$x/include/libaec.h" "$x/include/szlib.h" "$r/include"
copy "$x/$L/cmake/yaml-cpp" "$x/$L/cmake/fmt" "$x/$L/cmake/Boost-1.74.0" "$x/$L/cmake/boost_headers-1.74.0" \
     "$x/$L/cmake/boost_program_options-1.74.0" "$x/$L/cmake/BoostDetectToolset-1.74.0.cmake" "$x/$L/cmake/hwy" "$r/$L/cmake"
copy "$x/share/cmake/nlohmann_json" "$r/share/cmake"
copy "$x/lib/cmake/Catch2" "$r/lib/cmake"
# Static archives only.
copy "$x/$L/libyaml-cpp.a" "$x/$L/libboost_program_options.a" "$x/$L/libpcre2-8.a" "$x/$L/libz.a" \
     "$x/$L/libaec.a" "$x/$L/libsz.a" "$r/$L"
copy "$x/$L/pkgconfig/libpcre2-8.pc" "$r/$L/pkgconfig"
# yaml-cpp's and fmt's configs name their shared libraries: point yaml-cpp at its
# archive, and let fmt's compiled target (unused: prism takes fmt header-only) go unchecked.
sed -i -e 's|libyaml-cpp\.so\.[0-9.]*"|libyaml-cpp.a"|' -e '/IMPORTED_SONAME_NONE/d' "$r/$L/cmake/yaml-cpp/yaml-cpp-targets-none.cmake"
sed -i '/_cmake_import_check_files_for_fmt::fmt/d' "$r/$L/cmake/fmt/fmt-targets-none.cmake"
# Likewise Catch2's prebuilt main (prism has its own: test/catch_main.cpp).
sed -i '/_cmake_import_check_files_for_Catch2::Catch2WithMain/d' "$r/lib/cmake/Catch2/Catch2Targets-none.cmake"
rm -f "$r/$L/cmake/boost_program_options-1.74.0/libboost_program_options-variant-shared.cmake"
# Highway: its runtime (hwy::SupportedTargets, CPUID) is only in libhwy.so. Carried under its
# SONAME, the name the loader looks for; contrib and test are not carried, nor checked.
hwy_so=$(cd "$x/$L" && ls libhwy.so.1.* | head -1)
cp -L "$x/$L/$hwy_so" "$r/$L/libhwy.so.1"
sed -i -e "s|libhwy\.so\.1\.[0-9.]*\"|libhwy.so.1\"|g" -e '/_cmake_import_check_files_for_hwy::hwy_contrib/d' \
       -e '/_cmake_import_check_files_for_hwy::hwy_test/d' "$r/$L/cmake/hwy/hwy-config-none.cmake"
# HDF5 in the folder FindHDF5 is pointed at (HDF5_ROOT): include/ and lib/ as real folders.
h=$r/$L/hdf5/serial
mkdir -p "$h/include" "$h/lib"
cp -L "$x/include/hdf5/serial/"*.h "$h/include/"
cp -L "$x/$L/libhdf5_serial.a" "$h/lib/libhdf5.a"
cp -L "$x/$L/libhdf5_serial_cpp.a" "$h/lib/libhdf5_cpp.a"
# pkgconf, for a device without pkg-config.
copy "$x/bin/pkgconf" "$r/bin"
cp -L "$x/$L/libpkgconf.so.3" "$r/$L/"

# Boost: the header closure of what prism includes, as g++ resolves it. The roots are
# read from the sources, so a new Boost include cannot be missed (ci-cuda.sh fails when a
# system header is used instead of .device's).
grep -rhoE '^#include <boost/[^>]+>' lib apps kernels test | sort -u > "$tmp/boost.cpp"
[ -s "$tmp/boost.cpp" ] || { echo "device-prepare: no #include <boost/...> found in lib/ apps/ kernels/ test/" >&2; exit 1; }
boost_roots=$(sed 's/#include <boost\/\(.*\)>/\1/' "$tmp/boost.cpp" | tr '\n' ' ')
: > "$tmp/boost.list"
for std in c++17 c++20; do
  for nd in "" -DNDEBUG; do
    g++ -std=$std $nd -M -I"$x/include" "$tmp/boost.cpp" | tr ' \\' '\n\n' | sed -n "s|^$x/include/||p" >> "$tmp/boost.list"
  done
done
(cd "$x/include" && find boost/config -type f >> "$tmp/boost.list")
sort -u "$tmp/boost.list" -o "$tmp/boost.list"
(cd "$x/include" && tar -cf - -T "$tmp/boost.list") | tar -C "$r/include" -xf -
boost_headers=$(wc -l < "$tmp/boost.list")

# Vocabulary and a small text for tiny shards.
[ -f data/cache/gpt2.tiktoken ] || bash data/get-vocab.sh
[ -d data/cache/austen/text ] || bash data/get-corpus.sh
cp data/cache/gpt2.tiktoken "$dest/"
mkdir -p "$dest/text"
cp $(ls data/cache/austen/text/*.txt | head -24) "$dest/text/"

# pkg-config over .device alone (prefixes rewritten by the sysroot; system dirs kept).
cat > "$dest/bin/pkg-config" <<'EOF'
#!/bin/sh
# pkg-config over .device's .pc files only (made by scripts/device-prepare.sh).
d=$(cd "$(dirname "$0")/.." && pwd)
export PKG_CONFIG_LIBDIR="$d/root/usr/lib/x86_64-linux-gnu/pkgconfig" PKG_CONFIG_PATH=
export PKG_CONFIG_SYSROOT_DIR="$d/root" PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
if LD_LIBRARY_PATH="$d/root/usr/lib/x86_64-linux-gnu" "$d/root/usr/bin/pkgconf" --version >/dev/null 2>&1; then
  LD_LIBRARY_PATH="$d/root/usr/lib/x86_64-linux-gnu" exec "$d/root/usr/bin/pkgconf" "$@"
fi
for p in pkgconf pkg-config; do
  sys=$(command -v "$p" 2>/dev/null) && exec "$sys" "$@"
done
echo "pkg-config: neither the carried pkgconf nor a system one runs here" >&2
exit 127
EOF
chmod +x "$dest/bin/pkg-config"

# The initial cache: every location relative to this file.
cat > "$dest/prism-deps.cmake" <<'EOF'
# cmake -C .device/prism-deps.cmake: the full prism's libraries from .device/ alone
# (scripts/device-prepare.sh). Paths are relative to this file: the folder moves.
get_filename_component(_d "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
set(_r "${_d}/root/usr")
set(_l "${_r}/lib/x86_64-linux-gnu")
set(CMAKE_PREFIX_PATH "${_r}" CACHE STRING "")
set(yaml-cpp_DIR "${_l}/cmake/yaml-cpp" CACHE PATH "")
set(fmt_DIR "${_l}/cmake/fmt" CACHE PATH "")
set(Boost_DIR "${_l}/cmake/Boost-1.74.0" CACHE PATH "")
set(Boost_USE_STATIC_LIBS ON CACHE BOOL "")
set(nlohmann_json_DIR "${_r}/share/cmake/nlohmann_json" CACHE PATH "")
set(Catch2_DIR "${_r}/lib/cmake/Catch2" CACHE PATH "")
set(hwy_DIR "${_l}/cmake/hwy" CACHE PATH "")
set(PRISM_CATCH2_INCLUDE_DIR "${_r}/include" CACHE PATH "")
set(PRISM_GLOO_INCLUDE_DIR "${_r}/include" CACHE PATH "")
set(HDF5_ROOT "${_l}/hdf5/serial" CACHE PATH "")
set(HDF5_USE_STATIC_LIBRARIES ON CACHE BOOL "")
set(HDF5_NO_FIND_PACKAGE_CONFIG_FILE ON CACHE BOOL "")
# No h5cc wrapper is carried; a system one must not be taken instead.
set(HDF5_C_COMPILER_EXECUTABLE "${_d}/no-h5cc" CACHE FILEPATH "")
set(HDF5_CXX_COMPILER_EXECUTABLE "${_d}/no-h5cc" CACHE FILEPATH "")
set(PKG_CONFIG_EXECUTABLE "${_d}/bin/pkg-config" CACHE FILEPATH "")
# What static HDF5 needs after it on every link line (its .settings: -lsz -lz -ldl -lm;
# libcurl/libcrypto serve only the S3/HDFS drivers, which prism never pulls in).
set(CMAKE_CXX_STANDARD_LIBRARIES "${_l}/libsz.a ${_l}/libaec.a ${_l}/libz.a -ldl -lm" CACHE STRING "")
EOF

# The manifest: files (checked on the device in the first second), packages, symbol versions.
glibc_of() { objdump -T "$1" 2>/dev/null | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1; }
glibcxx_of() { objdump -T "$1" 2>/dev/null | grep -oE 'GLIBCXX_[0-9.]+' | sort -uV | tail -1; }
{
  echo "# .device/: carried to the GPU machine by run(carry=[\".device\"]); made by scripts/device-prepare.sh on $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  for p in "${packages[@]}"; do
    deb=$(ls "$tmp"/"${p}"_*.deb | head -1)
    echo "package $(basename "$deb")  sha256 $(sha256sum "$deb" | cut -d' ' -f1)"
  done
  echo "boost-headers $boost_headers (closure of ${boost_roots% }, and boost/config)"
  for b in "$r/bin/pkgconf" "$r/$L/libpkgconf.so.3" "$r/$L/libhwy.so.1"; do
    echo "needs ${b#$dest/}  $(glibc_of "$b") $(glibcxx_of "$b")"
  done
  (cd "$dest" && find root bin prism-deps.cmake gpt2.tiktoken text -type f | sort | while read -r f; do
     echo "file $f $(stat -c %s "$f") $(sha256sum "$f" | cut -d' ' -f1)"
   done)
} > "$dest/MANIFEST"
files=$(grep -c '^file ' "$dest/MANIFEST")
size=$(du -sb "$dest" | cut -f1)
say "wrote $dest/: $files files, $((size / 1024 / 1024)) MiB ($size bytes); the carry limit is 64 MiB with the tree ($(git ls-files -z | xargs -0 cat | wc -c) bytes tracked)"
grep -E '^(package|needs|boost-headers)' "$dest/MANIFEST" | sed 's/^/  /'

# --check: the full configure here against .venv's torch, from .device alone.
if [ "${1:-}" = "--check" ]; then
  py=${2:-.venv/bin/python}
  build=build-device-check
  say "configuring the full build in $build/ against $py's torch with .device's libraries"
  rm -rf "$build"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -C "$dest/prism-deps.cmake" -S . -B "$build" "${gen[@]}" -DPRISM_PYTHON="$py" > "$build.configure.log" 2>&1 \
    || { cat "$build.configure.log"; die "configure failed"; }
  bad=$(grep -E '^(yaml-cpp_DIR|hwy_DIR|Boost_DIR|boost_program_options_DIR|nlohmann_json_DIR|Catch2_DIR|fmt_DIR|HDF5_[A-Za-z_]*LIBRARY[A-Za-z_]*|HDF5_[A-Z_]*INCLUDE_DIR|pkgcfg_lib_PCRE2_pcre2-8|PRISM_GLOO_INCLUDE_DIR)(:[A-Z]+)?=' \
        "$build/CMakeCache.txt" | grep -v "=$PWD/$dest/" | grep -vE '=$|NOTFOUND' || true)
  [ -z "$bad" ] || { echo "$bad"; die "the configure above took these from outside .device"; }
  grep 'prism:' "$build.configure.log" | sed 's/^/  /'
  say "full configure OK from .device alone"
fi
