#pragma once
// The CUDA back end of causal_attention: binds the kernels of kernels/cuda to
// at::Tensor. Built only when PRISM_WITH_CUDA is defined (a CUDA LibTorch and nvcc).
#include <torch/torch.h>

#include <string>

#include "prism/ops/attention.h"

namespace prism::attention {

// Flash-style causal attention on the GPU, differentiable in q, k and v.
// q, k, v: (B, T, H, D) CUDA tensors on one device, one dtype (float32, bfloat16
// or float16), unit stride along D (strided views of a fused qkv projection are
// read in place). D <= 256; head dims other than 32/64/96/128/192/256 are
// zero-padded to the next one. Runs on the current CUDA stream of q's device.
// distance (when want_distance): float32 (B, H, T), sum_j p_ij (i - j), not differentiable.
Output cuda_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             bool want_distance);

// Whether cuda_causal_attention accepts these inputs; if not and `why` is given,
// it says why (CPU tensor, dtype, head dim, dropout, ...). Used by `auto` dispatch.
bool cuda_attention_supports(const torch::Tensor& q, double dropout_p, std::string* why = nullptr);

}  // namespace prism::attention
