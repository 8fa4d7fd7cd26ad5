"""PyTorch eager reference training loop: the baseline of `prism bench train`.

Same model as Prism's (gpt_reference.GPT; attention through
F.scaled_dot_product_attention as nanoGPT does), AdamW with nanoGPT's grouping,
gradient clipping, optional bf16 autocast, random tokens. Prints one JSON line
with tokens/s measured over the timed steps.

    python train_reference.py --layers 6 --d-model 128 --heads 4,4,4,4,4,4 \
        --vocab 50257 --batch 8 --seq 256 --steps 10 --warmup 3 --dtype bf16 --threads 2
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import gpt_reference


class SdpaAttention(gpt_reference.CausalSelfAttention):
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, required=True)
    ap.add_argument("--heads", required=True, help="comma separated head count per layer")
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    heads = [int(h) for h in a.heads.split(",")]
    model = gpt_reference.GPT(a.vocab, a.block, a.d_model, heads, bias=True)
    for block, h in zip(model.h, heads):
        old = block.attn
        block.attn = SdpaAttention(a.d_model, h, True)
        block.attn.load_state_dict(old.state_dict())
    model.init_gpt2()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(a.seed + 1)

    def step():
        x = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
        y = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    dt = time.perf_counter() - t0
    print(json.dumps({"tokens_per_s": a.batch * a.seq * a.steps / dt, "seconds": dt, "loss": loss,
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
