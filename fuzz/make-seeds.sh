#!/usr/bin/env bash
# Seeds every harness from real files (fuzz/README.md):
#   config       experiments/**/*.yaml, each as a primary file
#   shard        the first tokens of a real prepared shard (data/cache/austen, or
#                test/reference/make_shards.py's synthetic ones), as whole shards
#   safetensors  a real checkpoint of a tiny run (model and trainer state), and
#                files written by Python's safetensors (every dtype, metadata)
#   tiktoken     the first lines of data/cache/gpt2.tiktoken (a valid vocabulary)
#   tokenizer    the tokenizer parity test's text (Austen, code, Unicode, edge cases) in
#                pieces, and the task fixtures
#   tasks        test/fixtures/*.jsonl, each behind the byte choosing its task
#   run_h5       the run.h5 of the same tiny run, behind 'R' (raw mode)
#   jsonl        the JSONL corpus fixture of test/reference/llmc_fineweb.py, cut to a few KiB,
#                behind each mode byte (as it is, gzip, zstd; key text or body), and its
#                .gz and .zst files as they are
#   parquet      small Parquet files written by pyarrow (FineWeb's columns; every codec,
#                dictionary on and off, data pages v1 and v2, large strings, nulls, many
#                row groups) and the files a reader must refuse by row (llmc_fineweb.py bad)
# plus the committed inputs of fuzz/corpus/<harness>/ (crashes found, hand-made cases).
#   fuzz/make-seeds.sh OUT_DIR [PRISM_BINARY]      (default binary: build/apps/prism/prism, the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: fuzz/make-seeds.sh OUT_DIR [PRISM_BINARY]}
prism=${2:-build/apps/prism/prism}
py=.venv/bin/python
say() { printf '[seeds] %s\n' "$*"; }
mkdir -p "$out"
for h in config shard safetensors tiktoken tokenizer tasks run_h5 jsonl parquet; do
  mkdir -p "$out/$h"
  [ -d "fuzz/corpus/$h" ] && cp fuzz/corpus/$h/* "$out/$h/" 2>/dev/null || true
done

# config: every shipped config file as the primary file.
i=0
while IFS= read -r f; do cp "$f" "$out/config/experiments-$((i++)).yaml"; done < <(find experiments -name '*.yaml' | sort)

# tiktoken: prefixes of the real vocabulary (ranks 0..n-1 are complete in each).
vocab=data/cache/gpt2.tiktoken
if [ -f "$vocab" ]; then
  for n in 256 300 1000; do head -n $n "$vocab" > "$out/tiktoken/gpt2-head-$n.tiktoken"; done
else
  say "no $vocab (run data/get-vocab.sh): tiktoken seeds are the committed ones only"
fi

# tokenizer: real text in 1-4 KiB pieces, the parity text, the task fixtures.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prose=$(find -L data/cache -type d -name text | head -n1)
if [ -n "$prose" ]; then
  "$py" test/reference/tokenizer_text.py "$work/text" --prose "$prose" --mb-code 0.03 --mb-unicode 0.03 --mb-edge 0.03 >/dev/null
else
  say "no corpus text under data/cache (run data/get-corpus.sh): tokenizer seeds without the parity text"
fi
"$py" - "$out/tokenizer" "$work/text" <<'PY'
import glob, os, sys
out, generated = sys.argv[1], sys.argv[2]
n = 0
for path in sorted(glob.glob(generated + "/*.txt")) + sorted(glob.glob("test/fixtures/*.jsonl")):
    data = open(path, "rb").read()
    for start in range(0, min(len(data), 32 * 1024), 4096):
        piece = data[start:start + 512 + (start % 3584)]
        open(os.path.join(out, f"{os.path.basename(path)}-{n:03d}"), "wb").write(piece)  # may cut a character: fine
        n += 1
PY

# tasks: the fixtures, each behind its task byte (0 hellaswag, 1 piqa, 2 arc_easy, 3 winogrande).
add_task() {
  {
    printf "\\x$(printf %02x "$1")"
    cat "$2"
    if [ -n "${3:-}" ]; then printf '#%%labels\n'; cat "$3"; fi
  } > "$out/tasks/$(basename "$2")-$1"
}
add_task 0 test/fixtures/hellaswag.jsonl
add_task 1 test/fixtures/piqa.jsonl test/fixtures/piqa-labels.lst
add_task 2 test/fixtures/arc_easy.jsonl
add_task 2 test/fixtures/arc_easy_hf.jsonl
add_task 3 test/fixtures/winogrande.jsonl
add_task 4 test/fixtures/hellaswag.jsonl   # skip_bad

# shards: real ones cut to their first tokens (the header's count rewritten), synthetic ones whole.
"$py" test/reference/make_shards.py "$work/synthetic" --train-tokens 3000 --val-tokens 1000 --vocab 512 >/dev/null
"$py" - "$out/shard" "$work/synthetic" <<'PY'
import glob, os, struct, sys
out, synthetic = sys.argv[1], sys.argv[2]
shards = sorted(glob.glob("data/cache/austen/*.bin")) + sorted(glob.glob(synthetic + "/*.bin"))
for path in shards:
    data = open(path, "rb").read()
    for n in (0, 1, 100, 1000):
        count = min(n, (len(data) - 1024) // 2)
        head = bytearray(data[:1024])
        struct.pack_into("<i", head, 8, count)
        open(os.path.join(out, f"{os.path.basename(path)}-{count}"), "wb").write(bytes(head) + data[1024:1024 + 2 * count])
PY

# safetensors: Python's safetensors writing every dtype prism reads, with metadata.
"$py" - "$out/safetensors" <<'PY'
import os, sys
import torch
from safetensors.torch import save_file
out = sys.argv[1]
g = torch.Generator().manual_seed(0)
tensors = {
    "f32": torch.randn(3, 4, generator=g), "f64": torch.randn(2, dtype=torch.float64, generator=g),
    "bf16": torch.randn(4, generator=g).bfloat16(), "f16": torch.randn(2, 2, generator=g).half(),
    "i64": torch.arange(3), "i32": torch.arange(4, dtype=torch.int32), "i16": torch.arange(2, dtype=torch.int16),
    "i8": torch.arange(5, dtype=torch.int8), "u8": torch.arange(3, dtype=torch.uint8),
    "bool": torch.tensor([True, False]), "scalar": torch.tensor(1.5), "empty": torch.zeros(0, 3),
}
save_file(tensors, os.path.join(out, "python-all-dtypes.safetensors"), metadata={"format": "pt", "note": "seed"})
save_file({"w": torch.ones(2, 2)}, os.path.join(out, "python-one.safetensors"))
PY

# A real run of a tiny model (2 layers x 64, vocabulary 512) for a checkpoint and a run.h5.
if [ -x "$prism" ]; then
  cat > "$work/tiny.yaml" <<YAML
model: {preset: test-tiny, vocab_size: 512}
schedule: {heads: [1, 4]}
train: {batch_size: 2, seq_len: 16, max_steps: 3, eval_every: 2, eval_tokens: 64, distance_every: 2,
        distance_batch: 2, checkpoint_every: 3, log_every: 1, threads: 1, dtype: fp32}
data: {dir: $work/synthetic}
YAML
  if "$prism" train "$work/tiny.yaml" --out "$work/run" >"$work/train.log" 2>&1; then
    ck=$(ls -d "$work"/run/checkpoints/step_* | tail -n1)
    cp "$ck/model.safetensors" "$out/safetensors/prism-model.safetensors"
    cp "$ck/state.safetensors" "$out/safetensors/prism-state.safetensors"
    { printf R; cat "$work/run/run.h5"; } > "$out/run_h5/prism-run.h5"
  else
    say "the tiny training run failed (seeds without a checkpoint or run.h5):"; tail -n 5 "$work/train.log"
  fi
else
  say "no prism binary at $prism: seeds without a checkpoint or run.h5"
fi
# jsonl and parquet: the corpus fixture of the data tests, small.
"$py" test/reference/llmc_fineweb.py fixture "$work/corpus" >/dev/null
"$py" test/reference/llmc_fineweb.py bad "$work/corpus/bad" >/dev/null
"$py" - "$out" "$work/corpus" <<'PY'
import os, sys
import pyarrow as pa, pyarrow.parquet as pq
out, corpus = sys.argv[1], sys.argv[2]
lines = open(os.path.join(corpus, "docs.jsonl"), "rb").read()[:3000]
for mode in (0, 1, 2, 4):
    open(os.path.join(out, "jsonl", f"fixture-mode{mode}"), "wb").write(bytes([mode]) + lines)
for ext in ("gz", "zst"):
    data = open(os.path.join(corpus, "docs.jsonl." + ext), "rb").read()[:4000]  # a cut stream too
    open(os.path.join(out, "jsonl", f"fixture-{ext}"), "wb").write(bytes([0]) + data)
texts = ["First row.", "", None, "Ünïcödé 日本語 🎉", "a longer text " * 20, "last"] * 3
table = pa.table({"text": pa.array(texts, type=pa.string()), "id": list(range(len(texts)))})
variants = {
    "snappy": dict(compression="snappy"), "zstd": dict(compression="zstd"), "gzip": dict(compression="gzip"),
    "none-plain": dict(compression="none", use_dictionary=False), "lz4": dict(compression="lz4"),
    "brotli": dict(compression="brotli"), "v2-pages": dict(data_page_version="2.0"),
    "groups-of-4": dict(row_group_size=4), "small-pages": dict(data_page_size=64, row_group_size=7),
}
for name, kw in variants.items():
    pq.write_table(table, os.path.join(corpus, name + ".parquet"), **kw)
large = pa.table({"text": pa.array(texts, type=pa.large_string())})
pq.write_table(large, os.path.join(corpus, "large-string.parquet"))
files = [os.path.join(corpus, f) for f in sorted(os.listdir(corpus)) if f.endswith(".parquet")]
files += [os.path.join(corpus, "bad", f) for f in sorted(os.listdir(os.path.join(corpus, "bad")))]
for path in files:
    data = open(path, "rb").read()
    if len(data) <= 64 * 1024:
        open(os.path.join(out, "parquet", os.path.basename(path)), "wb").write(bytes([0]) + data)
PY

for h in config shard safetensors tiktoken tokenizer tasks run_h5 jsonl parquet; do
  say "$h: $(ls "$out/$h" | wc -l) seeds"
done
