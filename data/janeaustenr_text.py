#!/usr/bin/env python3
"""Writes Jane Austen's six novels from the R package janeaustenr as UTF-8 text,
one file per chapter (front matter goes with the first chapter).

janeaustenr keeps each novel as an R character vector (one element per line of
the Project Gutenberg text) in data/Rdata.rdb, R's lazy-load database: a run of
records, each a 4-byte big-endian length followed by a zlib stream holding one
object in R's XDR serialisation. This reads exactly that, with the stdlib only.

usage: janeaustenr_text.py RDATA_RDB OUT_DIR
"""
import re
import struct
import sys
import zlib
from pathlib import Path

# The first line of each novel -> a short file-name stem.
NOVELS = {
    "SENSE AND SENSIBILITY": "sense_and_sensibility",
    "PRIDE AND PREJUDICE": "pride_and_prejudice",
    "MANSFIELD PARK": "mansfield_park",
    "EMMA": "emma",
    "NORTHANGER ABBEY": "northanger_abbey",
    "PERSUASION": "persuasion",
}
CHAPTER = re.compile(r"^\s*chapter\s+([0-9]+|[ivxlc]+)\s*$", re.IGNORECASE)
STRSXP, CHARSXP, UTF8_BIT, LATIN1_BIT = 16, 9, 1 << 15, 1 << 14


def records(blob):
    pos = 0
    while pos < len(blob):
        (size,) = struct.unpack(">I", blob[pos:pos + 4])
        z = zlib.decompressobj()
        raw = z.decompress(blob[pos + 4:])
        if len(raw) != size:
            raise ValueError(f"record at byte {pos}: {len(raw)} bytes, header says {size}")
        pos = len(blob) - len(z.unused_data)
        yield raw


def character_vector(raw):
    if raw[:2] != b"X\n":
        raise ValueError("not an XDR-serialised R object")
    (version,) = struct.unpack(">i", raw[2:6])
    p = 14
    if version == 3:  # native encoding name follows the three version ints
        (n,) = struct.unpack(">i", raw[p:p + 4])
        p += 4 + n
    flags, length = struct.unpack(">ii", raw[p:p + 8])
    p += 8
    if flags & 0xFF != STRSXP:
        raise ValueError(f"object of R type {flags & 0xFF}, expected a character vector")
    lines = []
    for _ in range(length):
        flags, n = struct.unpack(">ii", raw[p:p + 8])
        p += 8
        if flags & 0xFF != CHARSXP:
            raise ValueError("malformed character vector")
        if n < 0:  # NA
            lines.append("")
            continue
        lines.append(raw[p:p + n].decode("latin-1" if flags & LATIN1_BIT else "utf-8"))
        p += n
    return lines


def chapters(lines):
    """Splits a novel's lines at chapter headings; the heading starts its chapter."""
    out, cur, seen_chapter = [], [], False
    for line in lines:
        if CHAPTER.match(line) and seen_chapter:
            out.append(cur)
            cur = []
        seen_chapter |= bool(CHAPTER.match(line))
        cur.append(line)
    out.append(cur)
    return ["\n".join(c).strip("\n") + "\n" for c in out]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    found = set()
    for raw in records(src.read_bytes()):
        lines = character_vector(raw)
        stem = NOVELS.get(lines[0].strip().upper())
        if stem is None:
            raise SystemExit(f"{src}: unknown novel starting {lines[0]!r}")
        found.add(stem)
        for i, text in enumerate(chapters(lines), 1):
            (out / f"{stem}_{i:03d}.txt").write_text(text, encoding="utf-8")
    missing = set(NOVELS.values()) - found
    if missing:
        raise SystemExit(f"{src}: novels missing: {sorted(missing)}")


if __name__ == "__main__":
    main()
