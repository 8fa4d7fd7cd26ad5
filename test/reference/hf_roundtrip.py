"""Loads a `prism export --hf` directory with transformers (from PyPI, offline)
and compares it with what prism computed on the same tokens:
  - logits on token windows (the default attention path and the eager one that
    returns probabilities), against prism's, in fp32;
  - greedy generation from a prompt (HF generate, KV cache on and off), against
    prism's greedy sample; the prompt text encoded by the exported tokenizer,
    against prism's tokenizer;
  - attention distance d_i = sum_j p_ij (i - j) from output_attentions, per
    batch, layer and head, against `prism distance`'s /attention/heldout in
    run.h5 (same windows: the held-out shard read in order, as prism's loader).
A directory with an auto_map (the prism format) is loaded with
trust_remote_code=True; one without (gpt2) without it, as a stock model.

usage: hf_roundtrip.py --export DIR --expected FILE.safetensors [--run-h5 RUN.h5
                       --shard VAL.bin --seq-len T --batch B]
FILE.safetensors (written by the C++ test from prism's model): tokens (N, T),
logits (N, T, V), prompt (P,), greedy (G,); metadata prompt_text.
Prints one JSON object.
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402


def read_shard(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert header[0] == 20240520, f"{path}: not an llm.c shard"
    return np.fromfile(path, dtype=np.uint16, offset=256 * 4, count=int(header[2])).astype(np.int64)


def load(export_dir, attn=None):
    with open(os.path.join(export_dir, "config.json")) as f:
        remote = "auto_map" in json.load(f)
    kwargs = {"trust_remote_code": remote, "dtype": torch.float32}
    if attn:
        kwargs["attn_implementation"] = attn
    model = AutoModelForCausalLM.from_pretrained(export_dir, **kwargs)
    return model.eval()


def distance_by_head(attentions):
    """Per layer (batch rows x heads) -> mean over rows and queries, per head."""
    out = []
    for p in attentions:  # (B, h, T, T)
        T = p.shape[-1]
        i = torch.arange(T, dtype=torch.float64)
        lag = (i[:, None] - i[None, :]).clamp(min=0)
        d = (p.double() * lag).sum(-1)  # (B, h, T): sum_j p_ij (i - j)
        out.append(d.mean(dim=(0, 2)).numpy())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--run-h5")
    ap.add_argument("--shard")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--batch", type=int)
    a = ap.parse_args()

    with safe_open(a.expected, "pt") as f:
        exp = {k: f.get_tensor(k) for k in f.keys()}
        prompt_text = f.metadata()["prompt_text"]
    torch.manual_seed(0)
    model = load(a.export)
    eager = load(a.export, "eager")
    out = {"model_class": type(model).__name__}
    with torch.no_grad():
        tokens = exp["tokens"]
        logits = model(tokens).logits
        out["logits_shape"] = list(logits.shape)
        out["logits_max_abs_diff"] = float((logits - exp["logits"]).abs().max())
        res = eager(tokens, output_attentions=True)
        out["logits_eager_max_abs_diff"] = float((res.logits - exp["logits"]).abs().max())
        out["attention_heads"] = [int(p.shape[1]) for p in res.attentions]
        rows = [float(p.sum(-1).sub(1).abs().max()) for p in res.attentions]
        out["attention_rows_sum_to_one"] = max(rows) < 1e-5

        prompt = exp["prompt"][None]
        want = exp["greedy"].tolist()
        for name, cache in (("greedy_cached", True), ("greedy_uncached", False)):
            gen = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=len(want),
                                 do_sample=False, use_cache=cache)
            out[name] = gen[0, prompt.shape[1]:].tolist()
        out["greedy_prism"] = want
        out["greedy_equal"] = out["greedy_cached"] == want and out["greedy_uncached"] == want

    tok = AutoTokenizer.from_pretrained(a.export, trust_remote_code=True)
    out["prompt_ids_equal"] = tok(prompt_text, add_special_tokens=False)["input_ids"] == exp["prompt"].tolist()
    out["greedy_text"] = tok.decode(out["greedy_cached"])

    if a.run_h5:
        with h5py.File(a.run_h5, "r") as f:
            g = f["attention/heldout"]
            batches = int(g.attrs["batches"])
            layers = len(g["distance"][()])
            prism = [g[f"layer_{l:02d}/distance_by_batch"][()] for l in range(layers)]  # (batches, h_l)
            prism_layer = g["distance"][()]
        ids = read_shard(a.shard)
        T, B = a.seq_len, a.batch
        hf = [[] for _ in range(layers)]
        with torch.no_grad():
            for b in range(batches):
                x = torch.tensor(np.stack([ids[k * T: k * T + T] for k in range(b * B, (b + 1) * B)]))
                for l, d in enumerate(distance_by_head(eager(x, output_attentions=True).attentions)):
                    hf[l].append(d)
        diffs = [float(np.abs(np.array(hf[l]) - prism[l]).max()) for l in range(layers)]
        out["distance_batches"] = batches
        out["distance_max_abs_diff"] = max(diffs)
        out["distance_layer_hf"] = [float(np.mean(hf[l])) for l in range(layers)]
        out["distance_layer_prism"] = [float(v) for v in prism_layer]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
