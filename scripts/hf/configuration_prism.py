"""Configuration of a Prism GPT in Hugging Face transformers.

Written by `prism export RUN --hf DIR` next to modeling_prism.py; load with
AutoConfig / AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True).

A Prism GPT is GPT-2 with one difference: layer l has its own head count
`heads[l]` (head width n_embd / heads[l]). `n_head` is the baseline count (the
uniform model's, and the last layer's); `heads` is what the model uses.
`position_embedding` is "learned" (GPT-2's table of n_positions rows) or "rope"
(rotary, Llama's rotate_half convention with base `rope_theta`, each layer at its
own head width; n_positions is then the context it was trained at, not a limit).
"""
from transformers import PretrainedConfig


class PrismConfig(PretrainedConfig):
    model_type = "prism"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]
    # The names generic code (lm-evaluation-harness, generation, pipelines) reads.
    attribute_map = {
        "hidden_size": "n_embd",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
    }

    def __init__(
        self,
        vocab_size=50257,
        n_positions=1024,
        n_embd=768,
        n_layer=12,
        n_head=12,
        heads=None,
        bias=True,
        dropout=0.0,
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        position_embedding="learned",
        rope_theta=10000.0,
        bos_token_id=50256,
        eos_token_id=50256,
        tie_word_embeddings=True,
        use_cache=True,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        self.heads = [int(h) for h in heads] if heads is not None else [n_head] * n_layer
        self.bias = bias
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.position_embedding = position_embedding
        self.rope_theta = float(rope_theta)
        self.use_cache = use_cache
        if position_embedding not in ("learned", "rope"):
            raise ValueError(
                f"PrismConfig: position_embedding is {position_embedding!r}; use 'learned' or 'rope'"
            )
        if len(self.heads) != n_layer:
            raise ValueError(
                f"PrismConfig: heads lists {len(self.heads)} layers but n_layer is {n_layer}; "
                "give one head count per layer"
            )
        for layer, h in enumerate(self.heads):
            if h < 1 or n_embd % h != 0:
                raise ValueError(
                    f"PrismConfig: layer {layer} has {h} heads, which do not divide n_embd={n_embd}; "
                    "every head count must divide the model width"
                )
            if position_embedding == "rope" and (n_embd // h) % 2 != 0:
                raise ValueError(
                    f"PrismConfig: layer {layer} has heads of odd width {n_embd // h}; rotary positions "
                    "turn pairs of a head's dimensions, so every head width must be even"
                )
        super().__init__(
            bos_token_id=bos_token_id, eos_token_id=eos_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs
        )
