"""tiktoken's `gpt2` encoding, built offline from a gpt2.tiktoken file, as the
reference for Prism's tokenizer (no network: the ranks come from the file).
Any ranks file in tiktoken's format works the same way (a compact vocabulary
from `prism data vocab`): GPT-2's pattern, end-of-text at id = number of ranks.

  tiktoken_gpt2.py encode VOCAB TEXT OUT [--special]
      writes the ids of TEXT (a UTF-8 file) to OUT as little-endian uint32;
      encode_ordinary, or encode(allowed_special="all") with --special
  tiktoken_gpt2.py bench VOCAB TEXT [--seconds S] [--threads N]
      prints one JSON line: the best MB/s of encode_ordinary over repeated runs
      on one thread, and of encode_ordinary_batch over N threads when N > 1
"""
import argparse
import json
import time

import numpy as np
import tiktoken
from tiktoken.load import load_tiktoken_bpe

# GPT-2's pre-tokenisation pattern, exactly as in tiktoken_ext/openai_public.py.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def gpt2(vocab):
    ranks = load_tiktoken_bpe(vocab)
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": len(ranks)},
        explicit_n_vocab=len(ranks) + 1,
    )


def best_rate(fn, nbytes, seconds):
    best, start = float("inf"), time.perf_counter()
    runs = 0
    while runs < 2 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return nbytes / best / 1e6, runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["encode", "bench"])
    ap.add_argument("vocab")
    ap.add_argument("text")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--special", action="store_true")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--docs", type=int, default=64, help="bench: pieces the batch encode splits the text into")
    a = ap.parse_args()
    enc = gpt2(a.vocab)
    data = open(a.text, "rb").read()
    text = data.decode("utf-8")
    if a.mode == "encode":
        ids = enc.encode(text, allowed_special="all") if a.special else enc.encode_ordinary(text)
        np.asarray(ids, dtype="<u4").tofile(a.out)
        return
    tokens = len(enc.encode_ordinary(text))
    one, runs = best_rate(lambda: enc.encode_ordinary(text), len(data), a.seconds)
    result = {"tiktoken": tiktoken.__version__, "bytes": len(data), "tokens": tokens, "mbps_1_thread": one, "runs": runs}
    if a.threads > 1:
        step = max(1, len(text) // a.docs)
        docs = [text[i:i + step] for i in range(0, len(text), step)]
        many, _ = best_rate(lambda: enc.encode_ordinary_batch(docs, num_threads=a.threads), len(data), a.seconds)
        result["mbps_threads"] = many
        result["threads"] = a.threads
    print(json.dumps(result))


if __name__ == "__main__":
    main()
