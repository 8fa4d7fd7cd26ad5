"""Loads a Prism model.safetensors with Python's safetensors package and prints
its metadata and the sum of one tensor: proof that checkpoints need no Prism.

    python load_checkpoint.py MODEL.safetensors TENSOR_NAME
"""
import sys

from safetensors import safe_open
from safetensors.torch import load_file

path, name = sys.argv[1], sys.argv[2]
tensors = load_file(path)
with safe_open(path, "pt") as f:
    meta = f.metadata()
print(f"heads={meta['heads']} step={meta['step']} format={meta['format']}")
print(meta["config"])
print(f"sum={tensors[name].double().sum().item():.10g}")
