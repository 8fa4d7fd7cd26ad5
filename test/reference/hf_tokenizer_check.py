"""Checks the tokenizer files of `prism export --hf` against tiktoken: the
exported directory, loaded by transformers' AutoTokenizer (tokenizer.json) and
by GPT2Tokenizer (vocab.json + merges.txt), must encode every text file id for
id as tiktoken does with the same ranks file (GPT-2's regex, <|endoftext|> at
id = number of ranks, allowed as a special token) and decode back to the text.
No network: HF_HUB_OFFLINE is set before transformers loads.

usage: hf_tokenizer_check.py EXPORT_DIR VOCAB TEXT_FILE...
Prints one JSON object: per file the token count, whether the ids agree (and the
first disagreement in context), whether decoding gives the text back; the ids
of <|endoftext|>; the tokenizer's length.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import tiktoken  # noqa: E402
from tiktoken.load import load_tiktoken_bpe  # noqa: E402
from transformers import AutoTokenizer, GPT2Tokenizer  # noqa: E402

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def first_difference(a, b, enc, text):
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    at = len(enc.decode(a[:i]))
    return {"index": i, "text": text[max(0, at - 20): at + 20], "tiktoken": a[i: i + 5], "hf": b[i: i + 5]}


def main():
    export_dir, vocab, texts = sys.argv[1], sys.argv[2], sys.argv[3:]
    ranks = load_tiktoken_bpe(vocab)
    eot = len(ranks)
    enc = tiktoken.Encoding(name="prism-vocab", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": eot})
    # AutoTokenizer reads config.json too, which names remote code in the prism format.
    fast = AutoTokenizer.from_pretrained(export_dir, trust_remote_code=True)
    files = GPT2Tokenizer(vocab=os.path.join(export_dir, "vocab.json"), merges=os.path.join(export_dir, "merges.txt"))
    out = {"tokenizer_class": type(fast).__name__, "len": len(fast), "eot": eot,
           "eos_token_id": fast.eos_token_id, "bos_token_id": fast.bos_token_id,
           "eot_text_id": fast.convert_tokens_to_ids("<|endoftext|>"), "files": {}}
    for path in texts:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        want = enc.encode(text, allowed_special="all")
        got = fast(text, add_special_tokens=False)["input_ids"]
        got_files = files(text, add_special_tokens=False)["input_ids"]
        r = {"tokens": len(want), "chars": len(text), "equal": got == want, "gpt2_files_equal": got_files == want,
             "decodes": fast.decode(got) == text}
        if got != want:
            r["first_difference"] = first_difference(want, got, enc, text)
        out["files"][os.path.basename(path)] = r
    print(json.dumps(out))


if __name__ == "__main__":
    main()
