"""PyTorch eager reference training loop: the baseline of `prism bench train`.

Same model as Prism's (gpt_reference.GPT; attention through
F.scaled_dot_product_attention as nanoGPT does), AdamW with nanoGPT's grouping,
gradient clipping, optional bf16 autocast, random tokens. Prints one JSON line
with tokens/s measured over the timed steps.

--compile runs the model under torch.compile (Inductor, default mode). Compilation
happens in the first steps; warm-up continues until a step is no slower than 1.5x
the previous one (compilation done) and at least --warmup steps ran, and the time
spent beyond that many ordinary steps is reported apart as compile_s.

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
        q, k = self.rotate(q, k)
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
    ap.add_argument("--position", choices=["learned", "rope"], default="learned")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (compile time reported apart)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall, or cpu: process CPU time (as prism bench train --clock cpu)")
    a = ap.parse_args()
    now = time.perf_counter if a.clock == "wall" else time.process_time
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    heads = [int(h) for h in a.heads.split(",")]
    model = gpt_reference.GPT(a.vocab, a.block, a.d_model, heads, bias=True, position=a.position,
                              rope_theta=a.rope_theta)
    for block, h in zip(model.h, heads):
        old = block.attn
        block.attn = SdpaAttention(a.d_model, h, True, old.rotary[0])
        block.attn.load_state_dict(old.state_dict())
    model.init_gpt2()
    run_model = torch.compile(model) if a.compile else model
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
            _, loss = run_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    warm_times = []
    t_warm = now()
    while True:
        t = now()
        step()
        warm_times.append(now() - t)
        done = len(warm_times) >= max(a.warmup, 1)
        if a.compile:  # compiled (forward and backward) once a step is as fast as the one before
            done = done and len(warm_times) >= 3 and warm_times[-1] <= 1.5 * warm_times[-2]
        if done or len(warm_times) >= 50:
            break
    warm_s = now() - t_warm
    t0 = now()
    for _ in range(a.steps):
        loss = step()
    dt = now() - t0
    step_s = dt / a.steps
    # JSON has no NaN: a non-finite last loss is written as null (the caller says so).
    print(json.dumps({"tokens_per_s": a.batch * a.seq * a.steps / dt, "seconds": dt,
                      "loss": loss if math.isfinite(loss) else None,
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "compiled": a.compile, "warmup_steps": len(warm_times),
                      "compile_s": max(0.0, warm_s - len(warm_times) * step_s) if a.compile else 0.0}))


if __name__ == "__main__":
    main()
