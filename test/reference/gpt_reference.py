"""PyTorch reference of Prism's GPT: nanoGPT's architecture with one head count
per layer. Parity tests feed it the C++ model's weights and compare logits, loss
and every parameter gradient.

    python gpt_reference.py IN.safetensors OUT.safetensors

IN holds the weights (nanoGPT names), `idx` and `targets` (int64, B x T) and
__metadata__ with n_layer, d_model, heads (comma separated), bias ("1"/"0"),
and optionally position ("learned", the default, or "rope") and rope_theta.
OUT receives `logits`, `loss` and `grad.<name>` for every parameter.

Rotary positions are Hugging Face Llama's own code (LlamaRotaryEmbedding and
apply_rotary_pos_emb from transformers), one rotary embedding per head width.
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from safetensors import safe_open


def llama_rotary(d_model, n_head, rope_theta, block_size):
    """transformers' LlamaRotaryEmbedding for heads of width d_model / n_head."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    cfg = LlamaConfig(hidden_size=d_model, num_attention_heads=n_head, head_dim=d_model // n_head,
                      max_position_embeddings=block_size,
                      rope_parameters={"rope_type": "default", "rope_theta": float(rope_theta)})
    return LlamaRotaryEmbedding(cfg)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, bias, rotary=None):
        super().__init__()
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.c_proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary = [rotary]  # a list: not a submodule, so the state dict is the model's own

    def rotate(self, q, k):
        """q, k: (B, heads, T, head_dim), rotated by Hugging Face Llama's code when positions are rotary."""
        if self.rotary[0] is None:
            return q, k
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        T = q.shape[2]
        cos, sin = self.rotary[0](q, torch.arange(T, device=q.device)[None])
        return apply_rotary_pos_emb(q, k, cos, sin)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = self.rotate(q, k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, d_model, bias):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model, bias=bias)
        self.c_proj = nn.Linear(4 * d_model, d_model, bias=bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d_model, n_head, bias, rotary=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model, bias=bias)
        self.attn = CausalSelfAttention(d_model, n_head, bias, rotary)
        self.ln_2 = nn.LayerNorm(d_model, bias=bias)
        self.mlp = MLP(d_model, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, d_model, heads, bias, position="learned", rope_theta=10000.0):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(block_size, d_model) if position == "learned" else None
        rotary = {}
        if position == "rope":
            rotary = {n: llama_rotary(d_model, n, rope_theta, block_size) for n in set(heads)}
        self.h = nn.ModuleList(Block(d_model, n, bias, rotary.get(n)) for n in heads)
        self.ln_f = nn.LayerNorm(d_model, bias=bias)

    def init_gpt2(self):
        """GPT-2 initialisation, as Prism's model does: N(0, 0.02), residual
        projections scaled by 1/sqrt(2 L), zero biases, unit LayerNorm gains."""
        proj_std = 0.02 / math.sqrt(2 * len(self.h))
        for name, p in self.named_parameters():
            if ".ln_" in name or name.startswith("ln_"):
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, proj_std if name.endswith("c_proj.weight") else 0.02)
        return self

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied LM head
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def load_model(inp):
    """The model a parity test wrote to `inp` (weights, metadata heads and bias),
    with every tensor and the metadata of the file."""
    tensors = load_file(inp)
    with safe_open(inp, "pt") as f:
        meta = f.metadata()
    heads = [int(h) for h in meta["heads"].split(",")]
    position = meta.get("position", "learned")
    wte = tensors["wte.weight"]
    block = tensors["wpe.weight"].shape[0] if position == "learned" else tensors["idx"].shape[-1]
    model = GPT(wte.shape[0], block, wte.shape[1], heads, meta["bias"] == "1", position,
                float(meta.get("rope_theta", "10000")))
    params = dict(model.named_parameters())
    missing = set(params) - set(tensors)
    assert not missing, f"weights missing from {inp}: {sorted(missing)}"
    model.load_state_dict({k: tensors[k] for k in params}, strict=True)
    return model, tensors, meta


def main(inp, out):
    model, tensors, _ = load_model(inp)
    logits, loss = model(tensors["idx"], tensors["targets"])
    loss.backward()
    result = {"logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        result["grad." + name] = p.grad.contiguous()
    save_file(result, out)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], sys.argv[2])
