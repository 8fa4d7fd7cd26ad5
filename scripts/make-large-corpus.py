# Writes a Parquet corpus larger than 2 GiB from the data tests' fixture text, repeated
# (uncompressed, no dictionary, so the bytes on disk are the text's): for the one-off
# memory measurement of `prism data prepare` (docs/data.md, section 4). Not a test; the
# input is not committed.  Run from the repository root:
#   .venv/bin/python scripts/make-large-corpus.py OUT_DIR 3.5e9 test/reference
import os, sys
sys.path.insert(0, sys.argv[3])
import pyarrow as pa, pyarrow.parquet as pq
from llmc_fineweb import fixture_documents, fineweb_table
out, target = sys.argv[1], int(float(sys.argv[2]))
docs = fixture_documents("data/cache/austen/text")
os.makedirs(out, exist_ok=True)
total, k = 0, 0
while total < target:
    batch = [f"[{k}:{i}] {d}" for i, d in enumerate(docs * 600)]  # ~90 MB of text per file
    path = os.path.join(out, f"{k:03d}_00000.parquet")
    pq.write_table(fineweb_table(batch, k * len(batch)), path, compression="none", use_dictionary=False,
                   row_group_size=20000)
    total += os.path.getsize(path)
    k += 1
print(f"{k} files, {total} bytes ({total / 2**30:.2f} GiB) in {out}")
