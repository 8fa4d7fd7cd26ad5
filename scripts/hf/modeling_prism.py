"""Prism's GPT in Hugging Face transformers: GPT-2 with one head count per layer.

Written by `prism export RUN --hf DIR`; load with
    AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)
The modules and parameter names are Prism's own (nanoGPT's: transformer.wte,
transformer.h.N.attn.c_attn, ...; nn.Linear weights, not GPT-2's Conv1D), so
model.safetensors holds the checkpoint's tensors unchanged. Computation follows
prism's model exactly: pre-LayerNorm blocks (eps 1e-5), tanh GELU, attention
scaled by 1/sqrt(head width) with a causal mask, learned positions or rotary
ones (position_embedding "rope": Llama's rotate_half convention, each layer's q
and k turned at its own head width, angles computed in float64 as prism does),
LM head tied to the token embedding.

Supports the KV cache (generate), attention_mask (padding) and position_ids,
output_attentions (per layer a (batch, heads[l], query, key) tensor of
probabilities: layers differ in head count) and output_hidden_states.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .configuration_prism import PrismConfig

# transformers 5 calls the KV cache `cache`, 4.x `past_key_values`; the outputs follow.
_CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


def _rotary_tables(head_dim, theta, position_ids, dtype):
    """cos and sin of t * theta^(-2c/D), repeated for both halves: (B, 1, T, D) in `dtype`."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=position_ids.device) / head_dim))
    angles = position_ids[..., None].to(torch.float64) * inv_freq
    emb = torch.cat((angles, angles), dim=-1)[:, None]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class PrismAttention(nn.Module):
    """Causal self-attention with this layer's own head count."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.n_head = config.heads[layer_idx]
        self.head_dim = config.n_embd // self.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # W_Q, W_K, W_V
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x, allowed, cache=None, output_attentions=False, rotary=None):
        B, T, C = x.shape
        # Prism's layout: (B, T, 3, heads, head_dim), then (B, heads, T, head_dim) each.
        q, k, v = self.c_attn(x).view(B, T, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        if rotary is not None:  # rotary positions: q and k turned before the cache keeps k
            cos, sin = rotary
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        dropout = self.attn_dropout if self.training else 0.0
        probs = None
        if output_attentions:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            scores = scores.masked_fill(~allowed, float("-inf"))
            probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
            y = F.dropout(probs, dropout, self.training) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y)), probs


class PrismMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class PrismBlock(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        eps = config.layer_norm_epsilon
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=eps, bias=config.bias)
        self.attn = PrismAttention(config, layer_idx)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=eps, bias=config.bias)
        self.mlp = PrismMLP(config)

    def forward(self, x, allowed, cache=None, output_attentions=False, rotary=None):
        a, probs = self.attn(self.ln_1(x), allowed, cache, output_attentions, rotary)
        x = x + a
        return x + self.mlp(self.ln_2(x)), probs


class PrismPreTrainedModel(PreTrainedModel):
    config_class = PrismConfig
    base_model_prefix = "transformer"
    _no_split_modules = ["PrismBlock"]
    _supports_cache_class = True

    def _init_weights(self, module):
        # GPT-2's initialisation (used only for weights a checkpoint does not hold).
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(0.0, std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(0.0, std)
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            if module.bias is not None:
                module.bias.data.zero_()


def _allowed_keys(attention_mask, batch, queries, past, device):
    """(B, 1, T, past + T) booleans: query i (at absolute position past + i) sees key j
    when j <= past + i and key j is not padding. A query whose keys are all padding
    (a left-padded row's padding) keeps itself, so its softmax stays finite."""
    keys = past + queries
    q_pos = torch.arange(past, keys, device=device)[:, None]
    k_pos = torch.arange(keys, device=device)[None, :]
    allowed = (k_pos <= q_pos)[None, None].expand(batch, 1, queries, keys)
    if attention_mask is not None:
        valid = attention_mask[:, None, None, -keys:].to(torch.bool)
        allowed = (allowed & valid) | (k_pos == q_pos)[None, None]
    return allowed


class PrismModel(PrismPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.rope = config.position_embedding == "rope"
        self.wpe = None if self.rope else nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList([PrismBlock(config, i) for i in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.post_init()

    def get_input_embeddings(self):
        return self.wte

    def set_input_embeddings(self, value):
        self.wte = value

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        cache=None,
        past_key_values=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ):
        cache = cache if cache is not None else past_key_values
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        use_cache = use_cache if use_cache is not None else (self.config.use_cache and not self.training)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("PrismModel: pass exactly one of input_ids and inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.wte(input_ids)
        B, T = inputs_embeds.shape[:2]
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        past = cache.get_seq_length() if cache is not None else 0
        if past + T > self.config.n_positions and not self.rope:
            raise ValueError(
                f"PrismModel: {past + T} positions, but the model was trained with a context of "
                f"{self.config.n_positions} (n_positions); use at most that many tokens"
            )
        if position_ids is None:
            if attention_mask is not None:
                # Left padding: each row's positions count its own tokens only, as in training.
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]
            else:
                position_ids = torch.arange(past, past + T, device=inputs_embeds.device)[None]
        allowed = _allowed_keys(attention_mask, B, T, past, inputs_embeds.device)

        x = self.drop(inputs_embeds if self.rope else inputs_embeds + self.wpe(position_ids))
        # One rotary table per head width, shared by the layers of that width.
        rotary = {}
        if self.rope:
            widths = {block.attn.head_dim for block in self.h}
            position_ids = position_ids.expand(B, T)
            rotary = {d: _rotary_tables(d, self.config.rope_theta, position_ids, x.dtype) for d in widths}
        hidden_states = () if output_hidden_states else None
        attentions = () if output_attentions else None
        for block in self.h:
            if output_hidden_states:
                hidden_states += (x,)
            x, probs = block(x, allowed, cache if use_cache else None, output_attentions, rotary.get(block.attn.head_dim))
            if output_attentions:
                attentions += (probs,)
        x = self.ln_f(x)
        if output_hidden_states:
            hidden_states += (x,)
        cache = cache if use_cache else None
        if not return_dict:
            return tuple(v for v in (x, cache, hidden_states, attentions) if v is not None)
        return BaseModelOutputWithPast(
            last_hidden_state=x, hidden_states=hidden_states, attentions=attentions, **{_CACHE_FIELD: cache}
        )


class PrismForCausalLM(PrismPreTrainedModel, GenerationMixin):
    # The LM head is the token embedding (transformers 5 maps target to source; 4.x lists targets).
    _tied_weights_keys = (
        {"lm_head.weight": "transformer.wte.weight"} if _CACHE_FIELD == "cache" else ["lm_head.weight"]
    )

    def __init__(self, config):
        super().__init__(config)
        self.transformer = PrismModel(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.transformer.wte

    def set_input_embeddings(self, value):
        self.transformer.wte = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        cache=None,
        past_key_values=None,
        labels=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        logits_to_keep=0,
        **kwargs,
    ):
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        out = self.transformer(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            cache=cache if cache is not None else past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        x = out.last_hidden_state
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:
            x = x[:, -logits_to_keep:]
        logits = self.lm_head(x)
        loss = None
        if labels is not None:
            # labels are the inputs (shifted here, as in every transformers causal LM); -100 is ignored.
            loss = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.size(-1)).float(), labels[:, 1:].reshape(-1), ignore_index=-100
            )
        cache = getattr(out, _CACHE_FIELD)
        if not return_dict:
            rest = tuple(v for v in (cache, out.hidden_states, out.attentions) if v is not None)
            return ((loss,) if loss is not None else ()) + (logits,) + rest
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
            **{_CACHE_FIELD: cache},
        )
