#pragma once
// The LM head and the cross-entropy fused: mean over tokens of
// -log softmax(x W^T)[target], computed in vocabulary chunks so the (N x V)
// logits never exist whole. At GPT-2's V = 50257 those logits dominate memory
// traffic on small models (several passes over N x V floats per step); here
// each chunk stays hot in cache and the backward recomputes it instead.
#include <torch/torch.h>

namespace prism {

// x: (N, d) hidden states after the final LayerNorm; weight: (V, d) (the tied
// token embedding); targets: (N) int64, entries < 0 ignored. Returns the mean
// loss over the counted tokens (fp32 scalar). Under CPU/CUDA autocast the
// matmuls run in bf16 with fp32 softmax statistics, like autocast's linear +
// cross_entropy; gradients flow to x and weight.
torch::Tensor lm_head_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                                    int64_t vocab_chunk = 2048);

}  // namespace prism
