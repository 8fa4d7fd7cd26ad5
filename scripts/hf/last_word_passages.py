"""LAMBADA-style passages from a prepared corpus's held-out shard, for running
lm-evaluation-harness's lambada task offline on a `prism export --hf` model
(docs/huggingface.md): each line is {"text": "..."}, the first words (at most
--max-words, more than 40) of a paragraph of at least --min-words words, cut
after a purely alphabetic word, which the task asks the model to predict.

usage: last_word_passages.py VAL_SHARD VOCAB OUT.jsonl [--max 300] [--min-words 50] [--max-words 90]
VAL_SHARD: an llm.c-format shard (e.g. data/cache/austen/austen_val_000000.bin);
VOCAB: the tiktoken ranks file it was tokenised with (end-of-text = number of ranks).
"""
import argparse
import json
import re

import numpy as np
import tiktoken
from tiktoken.load import load_tiktoken_bpe

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def shard_text(shard, vocab):
    ranks = load_tiktoken_bpe(vocab)
    enc = tiktoken.Encoding(name="prism-vocab", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": len(ranks)})
    header = np.fromfile(shard, dtype=np.int32, count=256)
    if header[0] != 20240520:
        raise SystemExit(f"{shard}: not an llm.c token shard (magic {header[0]}). Fix: pass a prepared *_val_*.bin")
    ids = np.fromfile(shard, dtype=np.uint16, offset=256 * 4, count=int(header[2])).tolist()
    return enc.decode([i for i in ids if i != len(ranks)])


def passages(text, min_words, max_words, keep=40):
    for paragraph in re.split(r"\n\s*\n", text):
        words = paragraph.split()
        if len(words) < min_words:
            continue
        k = min(len(words), max_words)
        while k > keep and not re.fullmatch(r"[A-Za-z]+", words[k - 1]):
            k -= 1
        if k > keep:
            yield " ".join(words[:k])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shard")
    ap.add_argument("vocab")
    ap.add_argument("out")
    ap.add_argument("--max", type=int, default=300)
    ap.add_argument("--min-words", type=int, default=50)
    ap.add_argument("--max-words", type=int, default=90)
    a = ap.parse_args()
    rows = list(passages(shard_text(a.shard, a.vocab), a.min_words, a.max_words))[: a.max]
    with open(a.out, "w", encoding="utf-8") as f:
        for text in rows:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    print(f"{len(rows)} passages -> {a.out}")


if __name__ == "__main__":
    main()
