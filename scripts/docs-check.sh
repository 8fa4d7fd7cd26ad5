#!/usr/bin/env bash
# Runs the documentation's commands as a new user would, after the main job: every
# ```bash and ```python block of README.md and of the docs/ pages README links, in the
# order README links them, except a block right after a line
#   <!-- docs-check: skip: WHY -->
# Each block runs in its own `bash -e` (python blocks in .venv/bin/python), in a scratch
# directory whose entries link to the repository's (build, data, experiments, scripts,
# test, .venv, ...), so what the blocks write (runs/, sweeps/, hf/, tb/ ...) stays out of
# the tree. `prism` is build/apps/prism/prism with training shortened by overrides:
#   - `prism train CONFIG.yaml ...`, `prism search FILE.yaml ...` and `prism sweep FILE.yaml ...` get $PRISM_DOCS_OVERRIDES
#     appended (default below; a sweep also sweep.halving.min_steps=5), each but for a key
#     the block sets itself;
#   - an explicit train.max_steps=N becomes N/30 (a --resume that continues longer).
# Needs the build and the main job's data (scripts/setup.sh && scripts/quickstart.sh).
# Prints a line per block and ends with 'N passed, N failed'; exits 1 if any failed.
#   scripts/docs-check.sh [FILE.md ...]      default: README.md, then the pages it links
#   scripts/docs-check.sh --list [FILE.md ...]
#   PRISM_DOCS_WORKDIR=DIR                   run there (kept) instead of a new temp dir
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
say() { printf '[docs-check] %s\n' "$*"; }

list=0
if [ "${1-}" = --list ]; then list=1; shift; fi
files=("$@")
if ((${#files[@]} == 0)); then
  files=(README.md)
  # The pages README's "Documentation" section links, in its order (later pages use earlier pages' runs).
  while read -r page; do files+=("$page"); done < <(sed -n '/^## Documentation/,/^## /p' README.md |
    grep -o '(docs/[a-z_-]*\.md' | tr -d '(' | awk '!seen[$0]++')
fi

blocks=$(mktemp -d "${TMPDIR:-/tmp}/prism-docs-blocks.XXXXXX")
trap 'rm -rf "$blocks"' EXIT
# One file per block: NNN.sh or NNN.py, and NNN.where ("FILE:LINE"); skipped blocks get NNN.skip (why).
python3 - "$blocks" "${files[@]}" <<'PY'
import re, sys
out, files = sys.argv[1], sys.argv[2:]
n = 0
for path in files:
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(bash|python)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        prev = next((l for l in reversed(lines[:start - 1]) if l.strip()), "")
        skip = re.match(r"^<!--\s*docs-check:\s*skip:?\s*(.*?)\s*-->", prev)
        n += 1
        base = f"{out}/{n:03d}"
        open(f"{base}.where", "w").write(f"{path}:{start}")
        open(base + (".sh" if m.group(1) == "bash" else ".py"), "w").write("\n".join(body) + "\n")
        if skip:
            open(f"{base}.skip", "w").write(skip.group(1) or "marked")
PY

if ((list)); then
  for w in "$blocks"/*.where; do
    b=${w%.where}
    if [ -f "$b.skip" ]; then say "$(basename "$b") $(cat "$w"): skip ($(cat "$b.skip"))"
    else say "$(basename "$b") $(cat "$w"): run"; sed 's/^/      /' "$b".sh "$b".py 2>/dev/null || true; fi
  done
  exit 0
fi

[ -x build/apps/prism/prism ] || { say "error: build/apps/prism/prism is missing. Fix: run scripts/setup.sh && scripts/quickstart.sh first" >&2; exit 2; }
work=${PRISM_DOCS_WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/prism-docs.XXXXXX")}
mkdir -p "$work"
for e in "$root"/* "$root"/.venv; do
  name=$(basename "$e")
  case "$name" in runs|sweeps|hf|tb|reports|tasks) continue ;; esac
  [ -e "$work/$name" ] || ln -s "$e" "$work/$name"
done
say "running ${#files[@]} page(s) in $work: ${files[*]}"

export PRISM_DOCS_BIN="$root/build/apps/prism/prism"
export PRISM_DOCS_OVERRIDES=${PRISM_DOCS_OVERRIDES:-"train.max_steps=20 train.warmup_steps=2 train.eval_every=10 train.eval_tokens=8192 train.distance_every=10 train.checkpoint_every=10 train.log_every=5"}
env_file="$blocks/prism-function.sh"
cat > "$env_file" <<'SH'
# `prism` for the documentation's blocks: the build's binary, training shortened (docs-check.sh).
prism() {
  local args=() a
  for a in "$@"; do
    if [[ $a =~ ^train\.max_steps=([0-9]+)$ ]]; then a="train.max_steps=$(( (BASH_REMATCH[1] + 29) / 30 ))"; fi
    args+=("$a")
  done
  # The shortening overrides, but for keys the block sets itself (prism refuses two
  # overrides of one key): its own train.max_steps=N, already divided above, stays.
  local extra=() o given
  for o in $PRISM_DOCS_OVERRIDES; do
    given=0
    for a in "${args[@]}"; do [[ $a == "${o%%=*}="* || $a == "+${o%%=*}="* || $a == "++${o%%=*}="* ]] && given=1; done
    ((given)) || extra+=("$o")
  done
  if [[ ${1-} == train && ${2-} == *.yaml ]]; then
    "$PRISM_DOCS_BIN" "${args[@]}" "${extra[@]}"
  elif [[ ${1-} == search && ${2-} == *.yaml ]]; then
    "$PRISM_DOCS_BIN" "${args[@]}" "${extra[@]}"
  elif [[ ${1-} == sweep && ${2-} == *.yaml ]]; then
    "$PRISM_DOCS_BIN" "${args[@]}" "${extra[@]}" sweep.halving.min_steps=5
  else
    "$PRISM_DOCS_BIN" "${args[@]}"
  fi
}
export -f prism
SH

passed=0 failed=0 skipped=0
start=$(date +%s)
for w in "$blocks"/*.where; do
  b=${w%.where}
  where=$(cat "$w")
  if [ -f "$b.skip" ]; then
    skipped=$((skipped + 1))
    say "skip  $where ($(cat "$b.skip"))"
    continue
  fi
  t=$(date +%s)
  if [ -f "$b.sh" ]; then run=(env BASH_ENV="$env_file" bash -e "$b.sh"); else run=("$root/.venv/bin/python" "$b.py"); fi
  if (cd "$work" && "${run[@]}") > "$b.log" 2>&1; then
    passed=$((passed + 1))
    say "ok    $where ($(( $(date +%s) - t )) s)"
  else
    failed=$((failed + 1))
    say "FAIL  $where ($(( $(date +%s) - t )) s); the block:"
    sed 's/^/      /' "$b".sh "$b".py 2>/dev/null || true
    say "its output (last 40 lines):"
    tail -n 40 "$b.log" | sed 's/^/      /'
  fi
done
say "done in $(( $(date +%s) - start )) s; $skipped skipped (marked in the page); outputs in $work"
echo "docs: $passed passed, $failed failed"
((failed == 0))
