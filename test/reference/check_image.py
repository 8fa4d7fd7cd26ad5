"""Describes image files for the plot tests: format, size, and whether the
picture has content (distinct colours, spread of pixel values).

    check_image.py FILE [FILE ...]

Prints one JSON object per file on one line: {"path", "format", "bytes",
"width", "height", "colours", "std"}; PDFs give format "pdf" and their size only.
"""
import json
import os
import sys

import matplotlib.image as mpimg
import numpy as np


def describe(path):
    out = {"path": path, "bytes": os.path.getsize(path)}
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"%PDF"):
        out["format"] = "pdf"
        return out
    if head != b"\x89PNG\r\n\x1a\n":
        out["format"] = "unknown"
        return out
    img = mpimg.imread(path)
    out["format"] = "png"
    out["height"], out["width"] = int(img.shape[0]), int(img.shape[1])
    pixels = img.reshape(-1, img.shape[-1] if img.ndim == 3 else 1)
    out["colours"] = int(len(np.unique(pixels, axis=0)))
    out["std"] = float(pixels.std())
    return out


print(json.dumps([describe(p) for p in sys.argv[1:]]))
