#!/usr/bin/env bash
# Puts GPT-2's BPE ranks (tiktoken format) at data/cache/gpt2.tiktoken.
# Source: the PyPI source distribution of openai-whisper (MIT), which ships
# whisper/assets/gpt2.tiktoken; the file is checked against a recorded sha256.
# Idempotent: a present, verified file is left alone. Never run by the C++ code.
#   data/get-vocab.sh              uses .venv/bin/python -m pip, else python3 -m pip
#   PRISM_PYTHON=/path/python      another Python with pip
set -euo pipefail
cd "$(dirname "$0")/.."

pin=20250625
want=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
out=data/cache/gpt2.tiktoken
say() { printf '[get-vocab] %s\n' "$*"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$out" ] && [ "$(sha "$out")" = "$want" ]; then
  say "$out present (sha256 ok)"
  exit 0
fi

py=${PRISM_PYTHON:-}
[ -n "$py" ] || { [ -x .venv/bin/python ] && py=.venv/bin/python || py=python3; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say "downloading the openai-whisper==$pin sdist (for whisper/assets/gpt2.tiktoken)"
"$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
  -d "$tmp" "openai-whisper==$pin" >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log" >&2
  say "error: pip could not download openai-whisper==$pin. Fix: check that PyPI is reachable and pip works ($py -m pip --version)" >&2
  exit 1
}
sdist=$(ls "$tmp"/openai_whisper-*.tar.gz 2>/dev/null | head -n1)
[ -n "$sdist" ] || { say "error: no sdist in $tmp. Fix: rerun; check pip's output above" >&2; exit 1; }
tar -xzf "$sdist" -C "$tmp" --wildcards '*/whisper/assets/gpt2.tiktoken'
got=$(find "$tmp" -name gpt2.tiktoken | head -n1)
if [ "$(sha "$got")" != "$want" ]; then
  say "error: gpt2.tiktoken from openai-whisper==$pin has sha256 $(sha "$got"), expected $want. Fix: update the pin and hash in $0 after checking the file" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
cp "$got" "$out.tmp.$$"
mv "$out.tmp.$$" "$out"
say "wrote $out ($(wc -l <"$out") ranks, sha256 ok)"
