"""llm.c's FineWeb data step (karpathy/llm.c dev/data/fineweb.py with
dev/data/data_common.py's write_datafile), re-implemented on local files as the
reference for `prism data prepare`: the same documents in the same order give
the same shards, byte for byte.

The logic kept from fineweb.py: each document becomes [EOT] + encode_ordinary(text),
tokenised by a multiprocessing Pool (imap, chunksize 16, in order); the tokens
fill shards of exactly shard_size tokens, a document that does not fit is split
at the boundary and its rest starts the next shard; shard 0 is named val, the
others train; the last shard holds the remainder; each shard is a header of 256
int32 (20240520, 1, count) and the tokens as uint16. What differs: the documents
come from local Parquet / JSONL files (not load_dataset's download) and the
encoding is tiktoken's gpt2 built offline from a ranks file (tiktoken_gpt2.py).

  llmc_fineweb.py fixture OUT [--text-dir DIR] [--repeat R] [--all-paragraphs]
      writes a small corpus in FineWeb's Parquet layout (two files, several row
      groups, snappy and zstd) and the same documents as JSONL (plain, gzip in two
      members, zstd), from the first 400 paragraphs of the Austen chapters (all of
      them, ~4 MB: --all-paragraphs) plus edge cases (empty, whitespace,
      "<|endoftext|>" as text, NUL, CRLF, many scripts, a long one)
  llmc_fineweb.py bad OUT
      Parquet files a reader must refuse by row: bad_utf8.parquet (row 3 is not
      UTF-8), null.parquet (row 2 is null), numbers.parquet (`text` holds int64)
  llmc_fineweb.py shards VOCAB OUT --shard-size N [--name NAME] [--procs P]
                  [--text-key K] [--text-column C] INPUT...
      llm.c's pipeline on INPUT files (*.parquet, *.jsonl[.gz|.zst]) in the order
      given; prints one JSON line: seconds (reading, tokenising and writing),
      documents, text bytes, tokens, shards, procs
"""
import argparse
import gzip
import json
import multiprocessing as mp
import os
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiktoken_gpt2 import gpt2  # noqa: E402

MAGIC, VERSION = 20240520, 1

# ---------------------------------------------------------------- the fixture


def austen_paragraphs(text_dir):
    paras = []
    for name in sorted(os.listdir(text_dir)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(text_dir, name), encoding="utf-8") as f:
            for p in f.read().split("\n\n"):
                p = p.strip("\n")
                if p.strip():
                    paras.append(p)
    return paras


def fixture_documents(text_dir, all_paragraphs=False):
    paras = austen_paragraphs(text_dir) if text_dir else []
    docs = list(paras) if all_paragraphs else paras[:400]
    edge = [
        "",
        "   ",
        "\n\n",
        "The text <|endoftext|> is ordinary text here, as in encode_ordinary.",
        "Zero\x00byte and tab\tand CRLF\r\nlines\r\n",
        "Ünïcödé: naïve café, 日本語のテキスト, Ελληνικά, русский, עברית, العربية, हिन्दी, 🎉🚀 emoji.",
        "Numbers 1234567890 and 3.14159, contractions it's we've they'll I'd.",
        "  leading spaces and trailing spaces   ",
        "\n".join(paras[400:440]) if len(paras) > 440 else "long " * 2000,
    ]
    for i, e in enumerate(edge):  # spread the edge cases through the corpus
        docs.insert(min(len(docs), 7 + 37 * i), e)
    return docs


def fineweb_table(docs, first):
    n = len(docs)
    return pa.table({
        "text": pa.array(docs, type=pa.string()),
        "id": [f"<urn:uuid:{first + i:08d}-0000-0000-0000-000000000000>" for i in range(n)],
        "dump": ["CC-MAIN-2013-20"] * n,
        "url": [f"http://example.org/{first + i}" for i in range(n)],
        "date": ["2013-05-18T07:24:47Z"] * n,
        "file_path": ["s3://commoncrawl/crawl-data/CC-MAIN-2013-20/file.warc.gz"] * n,
        "language": ["en"] * n,
        "language_score": pa.array([0.9] * n, type=pa.float64()),
        "token_count": pa.array([len(d) // 4 for d in docs], type=pa.int64()),
    })


def write_fixture(out, text_dir, repeat, all_paragraphs):
    docs = fixture_documents(text_dir, all_paragraphs) * repeat
    half = len(docs) // 2
    os.makedirs(os.path.join(out, "parquet"), exist_ok=True)
    # Two files as a FineWeb snapshot has them (000_00000.parquet, ...), several row groups each.
    pq.write_table(fineweb_table(docs[:half], 0), os.path.join(out, "parquet", "000_00000.parquet"),
                   row_group_size=37 * repeat, compression="snappy")
    pq.write_table(fineweb_table(docs[half:], half), os.path.join(out, "parquet", "001_00000.parquet"),
                   row_group_size=53 * repeat, compression="zstd")
    lines = []
    for i, d in enumerate(docs):
        obj = {"id": i, "text": d, "meta": {"source": "fixture", "n": [i, i + 1]}} if i % 2 else {"text": d, "id": i}
        lines.append(json.dumps(obj, ensure_ascii=(i % 3 == 0)) + "\n")
        if i % 50 == 49:
            lines.append("\n")  # blank lines are not records
    data = "".join(lines).encode("utf-8")
    with open(os.path.join(out, "docs.jsonl"), "wb") as f:
        f.write(data)
    cut = len(data) // 3
    with open(os.path.join(out, "docs.jsonl.gz"), "wb") as f:  # two gzip members, as `cat a.gz b.gz`
        f.write(gzip.compress(data[:cut]))
        f.write(gzip.compress(data[cut:]))
    with pa.CompressedOutputStream(os.path.join(out, "docs.jsonl.zst"), "zstd") as f:
        f.write(data)
    print(json.dumps({"documents": len(docs), "parquet_rows": [half, len(docs) - half]}))


def write_bad(out):
    os.makedirs(out, exist_ok=True)
    raw = [b"fine", b"also fine", b"still fine", b"bad \xff byte", b"after"]
    # A binary array viewed as strings: Parquet stores the bytes unchecked, as another writer might.
    texts = pa.array(raw, type=pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": texts, "id": list(range(5))}), os.path.join(out, "bad_utf8.parquet"))
    pq.write_table(pa.table({"text": pa.array(["a", "b", None, "d"], type=pa.string())}), os.path.join(out, "null.parquet"))
    pq.write_table(pa.table({"text": pa.array([1, 2, 3], type=pa.int64())}), os.path.join(out, "numbers.parquet"))


# ---------------------------------------------------------------- llm.c's pipeline


def read_documents(paths, text_key, text_column):
    for path in paths:
        if path.endswith(".parquet"):
            for batch in pq.ParquetFile(path).iter_batches(columns=[text_column], batch_size=1024):
                yield from batch.column(0).to_pylist()
            continue
        if path.endswith(".zst"):
            f = pa.CompressedInputStream(pa.OSFile(path), "zstd")
            data = f.read()
        elif path.endswith(".gz"):
            with gzip.open(path, "rb") as g:
                data = g.read()
        else:
            with open(path, "rb") as g:
                data = g.read()
        for line in data.split(b"\n"):
            if line.strip():
                yield json.loads(line)[text_key]


ENC = None


def init_worker(vocab):
    global ENC
    ENC = gpt2(vocab)


def tokenize(text):
    # As fineweb.py's tokenize_gpt2: EOT first, then encode_ordinary, as uint16.
    tokens = [ENC._special_tokens["<|endoftext|>"]]
    tokens.extend(ENC.encode_ordinary(text))
    tokens_np = np.array(tokens)
    assert (0 <= tokens_np).all() and (tokens_np < 2**16).all(), "token dictionary too large for uint16"
    return tokens_np.astype(np.uint16)


def write_datafile(filename, toks):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = MAGIC, VERSION, len(toks)
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(np.array(toks, dtype=np.uint16).tobytes())


def shards(a):
    os.makedirs(a.out, exist_ok=True)
    stats = {"documents": 0, "text_bytes": 0, "tokens": 0, "shards": 0}

    def documents():
        for text in read_documents(a.inputs, a.text_key, a.text_column):
            stats["documents"] += 1
            stats["text_bytes"] += len(text.encode("utf-8"))
            yield text

    def write(index, toks):
        split = "val" if index == 0 else "train"
        write_datafile(os.path.join(a.out, f"{a.name}_{split}_{index:06d}.bin"), toks)
        stats["shards"] += 1
        stats["tokens"] += len(toks)

    start = time.perf_counter()
    with mp.Pool(a.procs, initializer=init_worker, initargs=(a.vocab,)) as pool:
        shard_index = 0
        buf = np.empty((a.shard_size,), dtype=np.uint16)
        count = 0
        for tokens in pool.imap(tokenize, documents(), chunksize=16):
            if count + len(tokens) < a.shard_size:
                buf[count:count + len(tokens)] = tokens
                count += len(tokens)
            else:
                remainder = a.shard_size - count
                buf[count:count + remainder] = tokens[:remainder]
                write(shard_index, buf.tolist())
                shard_index += 1
                rest = len(tokens) - remainder
                assert rest <= a.shard_size, "a document longer than a shard (llm.c's loop needs it to fit)"
                buf[0:rest] = tokens[remainder:]
                count = rest
        if count != 0:
            write(shard_index, buf[:count].tolist())
    stats["seconds"] = time.perf_counter() - start
    stats["procs"] = a.procs
    print(json.dumps(stats))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    f = sub.add_parser("fixture")
    f.add_argument("out")
    f.add_argument("--text-dir", default="")
    f.add_argument("--repeat", type=int, default=1)
    f.add_argument("--all-paragraphs", action="store_true")
    b = sub.add_parser("bad")
    b.add_argument("out")
    s = sub.add_parser("shards")
    s.add_argument("vocab")
    s.add_argument("out")
    s.add_argument("inputs", nargs="+")
    s.add_argument("--shard-size", type=int, required=True)
    s.add_argument("--name", default="fineweb")
    s.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 3) - 2))
    s.add_argument("--text-key", default="text")
    s.add_argument("--text-column", default="text")
    a = ap.parse_args()
    if a.mode == "fixture":
        write_fixture(a.out, a.text_dir, a.repeat, a.all_paragraphs)
    elif a.mode == "bad":
        write_bad(a.out)
    else:
        shards(a)


if __name__ == "__main__":
    main()
