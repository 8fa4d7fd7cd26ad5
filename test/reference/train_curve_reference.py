"""The reference trainer's loss curve for given weights and batches: the C++
trainer's curves are compared with it step by step (test/train/test_train_curve.cpp),
in fp32 and under bf16 autocast.

nanoGPT's training step on gpt_reference.GPT: AdamW with nanoGPT's grouping
(matrices decay, vectors do not), gradient clipping at `clip`, constant `lr`.

    python train_curve_reference.py IN.safetensors OUT.safetensors

IN holds the model's weights, `idx` and `targets` (steps, B, T), and metadata
heads, bias, lr, beta1, beta2, eps, weight_decay, clip, and optionally dtype
(fp32, the default, or bf16: the forward under CPU autocast to bf16, as
nanoGPT's train.py runs it). OUT receives `loss` (steps) and `grad_norm` (steps).
"""
import contextlib
import sys

import torch
from safetensors.torch import save_file

from gpt_reference import load_model


def main(inp, out):
    model, tensors, meta = load_model(inp)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    hp = {k: float(meta[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay", "clip")}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    bf16 = meta.get("dtype", "fp32") == "bf16"
    idx, targets = tensors["idx"], tensors["targets"]
    losses, norms = [], []
    for s in range(idx.shape[0]):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            _, loss = model(idx[s], targets[s])
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])))
        opt.step()
        losses.append(loss.item())
    save_file({"loss": torch.tensor(losses, dtype=torch.float64),
               "grad_norm": torch.tensor(norms, dtype=torch.float64)}, out)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], sys.argv[2])
