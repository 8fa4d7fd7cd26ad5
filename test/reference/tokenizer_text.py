"""Writes the text of the tokenizer parity test: several MB of varied UTF-8 in a
few files, each a different kind of input for GPT-2's regex and BPE.

  prose.txt       Jane Austen's novels (data/cache/austen/text, from data/get-corpus.sh)
  code.txt        Python source files of this interpreter's standard library
  unicode.txt     generated: many scripts, CJK, emoji (with ZWJ and skin tones),
                  combining marks, every Unicode White_Space character, NBSP
  edge.txt        generated: whitespace runs, mixed newlines (\\n, \\r\\n, \\r),
                  digit runs, contractions ('s 't 're 've 'm 'll 'd, also in
                  capitals and with curly quotes), punctuation runs, very long
                  pieces, "<|endoftext|>" inside text

The generated parts use a fixed seed, so the files are the same on every run.
Characters are drawn from Unicode 13 or older, so PCRE2's and tiktoken's
Unicode tables (of different versions) classify them alike.

usage: tokenizer_text.py OUT_DIR --prose DIR [--mb-code 1.5] [--mb-unicode 1] [--mb-edge 1]
"""
import argparse
import random
import sysconfig
from pathlib import Path


def prose(src: Path) -> str:
    files = sorted(src.glob("*.txt"))
    if not files:
        raise SystemExit(f"{src}: no .txt files. Fix: run data/get-corpus.sh")
    return "".join(f.read_text(encoding="utf-8") + "\n\n" for f in files)


def code(limit: int) -> str:
    root = Path(sysconfig.get_paths()["stdlib"])
    out, size = [], 0
    for f in sorted(root.glob("*.py")):
        try:
            t = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        out.append(t)
        size += len(t.encode())
        if size >= limit:
            break
    return "".join(out)


# (first, last) code points, all assigned before Unicode 13.
RANGES = [
    (0x0041, 0x007A), (0x00C0, 0x024F),  # Latin, Latin-1, Extended-A/B
    (0x0370, 0x03FF), (0x0400, 0x04FF),  # Greek, Cyrillic
    (0x0590, 0x05EA), (0x0620, 0x064A),  # Hebrew, Arabic letters
    (0x0660, 0x0669), (0x06F0, 0x06F9),  # Arabic-Indic digits
    (0x0900, 0x097F), (0x0E01, 0x0E5B),  # Devanagari, Thai
    (0x3041, 0x3096), (0x30A1, 0x30FA),  # Hiragana, Katakana
    (0x4E00, 0x9FA5), (0xAC00, 0xD7A3),  # CJK unified ideographs, Hangul syllables
    (0xFF01, 0xFF5E),                    # fullwidth forms
    (0x2150, 0x218B), (0x2460, 0x24FF),  # number forms, enclosed numbers (\p{N} but not digits)
    (0x2200, 0x22FF), (0x2190, 0x21FF),  # maths operators, arrows
    (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6D2), (0x1F900, 0x1F9FF),  # emoji
    (0x10400, 0x1044F),                  # Deseret (4-byte letters)
    (0x1D400, 0x1D7FF),                  # mathematical alphanumerics (letters and digits)
]
COMBINING = [chr(c) for c in range(0x0300, 0x0370)] + ["\u0902", "\u093C", "\u0E31", "\u20DD", "\uFE0F"]
WHITE_SPACE = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680"] + [chr(c) for c in range(0x2000, 0x200B)] + [
    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
NOT_WHITE_SPACE = ["\u180e", "\u200b", "\u200d", "\x1c", "\x1d", "\x1e", "\x1f", "\ufeff"]  # classed differently by some engines
SKIN = [chr(c) for c in range(0x1F3FB, 0x1F400)]


def unicode_mix(rng: random.Random, limit: int) -> str:
    out, size = [], 0
    while size < limit:
        kind = rng.random()
        if kind < 0.55:
            lo, hi = rng.choice(RANGES)
            w = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 12)))
        elif kind < 0.7:
            base = rng.choice("aeiouAEIOUnxyz") + "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 4)))
            w = base * rng.randint(1, 3)
        elif kind < 0.8:
            e = chr(rng.randint(0x1F466, 0x1F469))
            w = e + rng.choice(SKIN) + "\u200d" + chr(rng.randint(0x1F466, 0x1F469)) + rng.choice(["", "\ufe0f"])
        elif kind < 0.9:
            w = rng.choice(WHITE_SPACE + NOT_WHITE_SPACE) * rng.randint(1, 5)
        else:
            w = rng.choice(["naïve", "café", "Ωmega", "日本語のテキスト", "한국어", "Привет, мир", "مرحبا", "🙂👍🏽", "x²+y³", "½¾"])
        sep = rng.choice([" ", " ", " ", "", "\n", "\u3000", "\xa0", ", ", ". "])
        piece = w + sep
        out.append(piece)
        size += len(piece.encode())
    return "".join(out)


WORDS = "the quick brown fox jumps over a lazy dog while I think you know she said they would".split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
                "\u2019s", "\u2019ll", "''s", "'", "'x", "'ss"]


def edge_cases(rng: random.Random, limit: int) -> str:
    out, size = [], 0
    fixed = [
        " " * 1000, "\n" * 500, "\t" * 300, " \n" * 200, "x" * 3000, "1234567890" * 300, "!?" * 2000,
        "-" * 5000, "=" * 777, "\r\n" * 100, "a\u0301" * 400, "<|endoftext|>", "a<|endoftext|>b",
        "<|endoftext|><|endoftext|>", "  <|endoftext|>  ", "<|endoftext", "\u3000" * 50, "\xa0" * 50,
    ]
    for f in fixed:
        out.append(f + "\n")
    while size < limit:
        kind = rng.random()
        if kind < 0.35:
            w = rng.choice(WORDS) + rng.choice(CONTRACTIONS) + rng.choice(["", " ", "  "])
        elif kind < 0.5:
            w = rng.choice([" ", "\t", "\n", "\r\n", "\r", "\n\n", "  ", "\u00a0"]) * rng.randint(1, 40)
        elif kind < 0.65:
            w = str(rng.randint(0, 10 ** rng.randint(1, 30))) + rng.choice(["", " ", ".", ",", "%", "th "])
        elif kind < 0.8:
            w = "".join(rng.choice("!@#$%^&*()_+-=[]{};:'\",.<>/?\\|`~") for _ in range(rng.randint(1, 20)))
        elif kind < 0.9:
            w = rng.choice(WORDS).upper() + rng.choice(["'S", "'LL", "'s"]) + " "
        else:
            w = rng.choice(["<|endoftext|>", " <|endoftext|>\n", "\n\n\n", "   \n", "\t\t x", "  \r\n  "])
        out.append(w)
        size += len(w.encode())
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--prose", required=True)
    ap.add_argument("--mb-code", type=float, default=1.5)
    ap.add_argument("--mb-unicode", type=float, default=1.0)
    ap.add_argument("--mb-edge", type=float, default=1.0)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20240520)
    mb = 1 << 20
    files = {
        "prose.txt": prose(Path(a.prose)),
        "code.txt": code(int(a.mb_code * mb)),
        "unicode.txt": unicode_mix(rng, int(a.mb_unicode * mb)),
        "edge.txt": edge_cases(rng, int(a.mb_edge * mb)),
    }
    for name, text in files.items():
        (out / name).write_bytes(text.encode("utf-8"))


if __name__ == "__main__":
    main()
