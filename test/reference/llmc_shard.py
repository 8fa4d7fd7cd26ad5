"""llm.c's token shard format, written and read the way llm.c's Python does
(dev/data/data_common.py write_datafile, train_gpt2.py _load_data_shard), as
the reference for Prism's shard reader and writer.

  llmc_shard.py write PATH COUNT SALT   tokens[i] = (i * 7919 + SALT) % 50257
  llmc_shard.py read PATH               prints {"count", "sum", "weighted"} of the tokens,
                                        weighted = sum((i + 1) * tokens[i]) mod 2^64
"""
import json
import sys

import numpy as np

MAGIC, VERSION = 20240520, 1


def write(path, count, salt):
    toks = (np.arange(count, dtype=np.int64) * 7919 + salt) % 50257
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = MAGIC, VERSION, len(toks)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.astype(np.uint16).tobytes())


def read(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype=np.int32)
        assert header[0] == MAGIC, "magic number mismatch in the data .bin file"
        assert header[1] == VERSION, "unsupported version"
        ntok = int(header[2])
        tokens = np.frombuffer(f.read(), dtype=np.uint16)
    assert len(tokens) == ntok, "number of tokens read does not match header"
    t = tokens.astype(np.uint64)
    weighted = int(np.sum(t * np.arange(1, ntok + 1, dtype=np.uint64), dtype=np.uint64))
    print(json.dumps({"count": ntok, "sum": int(t.sum()), "weighted": weighted}))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        read(sys.argv[2])
