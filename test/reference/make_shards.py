"""Writes llm.c-format token shards (256 x int32 header: magic 20240520,
version 1, token count; then uint16 tokens) with a learnable synthetic
language, for trainer tests that must not depend on the tokenizer.

    python make_shards.py OUT_DIR [--train-tokens N] [--val-tokens N] [--vocab V] [--seed S]
        [--corrupt magic|truncate|short]

Documents start with EOT (50256 when the vocabulary is GPT-2's, else vocab-1)
and repeat short random "phrases", so a small model's loss falls quickly.
"""
import argparse
import os

import numpy as np


def write_shard(path, tokens, magic=20240520):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = magic, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def synthetic(n, vocab, rng):
    eot = 50256 if vocab > 50256 else vocab - 1
    phrases = [rng.integers(0, min(vocab - 1, 2000), size=rng.integers(3, 8)) for _ in range(40)]
    out = []
    while len(out) < n:
        out.append(eot)
        for _ in range(rng.integers(5, 30)):
            out.extend(phrases[rng.integers(0, len(phrases))])
    return out[:n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--train-tokens", type=int, default=200_000)
    ap.add_argument("--val-tokens", type=int, default=20_000)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corrupt", choices=["magic", "truncate", "short"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    val = synthetic(a.val_tokens, a.vocab, rng)
    train = synthetic(a.train_tokens, a.vocab, rng)
    write_shard(os.path.join(a.out, "synth_val_000000.bin"), val)
    train_path = os.path.join(a.out, "synth_train_000001.bin")
    if a.corrupt == "short":
        train = train[:10]
    write_shard(train_path, train, magic=12345 if a.corrupt == "magic" else 20240520)
    if a.corrupt == "truncate":
        size = os.path.getsize(train_path)
        with open(train_path, "r+b") as f:
            f.truncate(size - 1000)


if __name__ == "__main__":
    main()
