#!/usr/bin/env bash
# Puts the default corpus, Jane Austen's six novels (one file per chapter, 269
# files, 4.0 MB of UTF-8 prose), at data/cache/austen/text/.
# Source: the Debian package r-cran-janeaustenr (MIT; the novels themselves are
# in the public domain), fetched with `apt-get download` (no root, no install);
# its data file is checked against a recorded sha256. Idempotent.
# Tokenise it afterwards with:  prism data prepare --recipe austen
set -euo pipefail
cd "$(dirname "$0")/.."

pkg=r-cran-janeaustenr
ver=1.0.0-1
want=8fb5198960d0da724b1562f96e4221e5c1b41ff455000280b02c55980c3d8f21  # data/Rdata.rdb
out=data/cache/austen/text
stamp=$out/.complete
say() { printf '[get-corpus] %s\n' "$*"; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pkg $ver $want" ]; then
  say "$out present ($(ls "$out" | wc -l) chapters)"
  exit 0
fi

tmp=$(mktemp -d)
chmod 755 "$tmp"  # apt's download user must be able to write there
trap 'rm -rf "$tmp"' EXIT
fetch() { (cd "$tmp" && apt-get download -q "$pkg=$ver") >"$tmp/apt.log" 2>&1; }
say "downloading the Debian package $pkg=$ver"
if ! fetch; then
  if [ "$(id -u)" = 0 ]; then
    say "refreshing apt's package lists and retrying"
    apt-get update -qq >/dev/null 2>&1 || true
  fi
  fetch || {
    cat "$tmp/apt.log" >&2
    say "error: apt-get could not download $pkg=$ver. Fix: run 'apt-get update' (as root) and check that Debian's mirror is reachable" >&2
    exit 1
  }
fi
dpkg-deb -x "$tmp"/${pkg}_*.deb "$tmp/root"
rdb=$tmp/root/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb
got=$(sha256sum "$rdb" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  say "error: $pkg=$ver data/Rdata.rdb has sha256 $got, expected $want. Fix: update the pin and hash in $0 after checking the text" >&2
  exit 1
fi
rm -rf "$out.tmp"
python3 data/janeaustenr_text.py "$rdb" "$out.tmp"
echo "$pkg $ver $want" >"$out.tmp/.complete"
rm -rf "$out"
mv "$out.tmp" "$out"
say "wrote $out: $(ls "$out" | wc -l) chapters, $(du -sb --exclude=.complete "$out" | cut -f1) bytes"
