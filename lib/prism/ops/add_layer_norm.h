#pragma once
// The residual add and the LayerNorm that follows it, in every block:
//   h = x + r,   y = LayerNorm(h) = (h - mean) / sqrt(var + eps) * weight + bias
// x is the residual stream, r a block branch's output (attention or MLP) still to
// be added. On the CPU, with an fp32 stream, one kernel pass (kernels/cpu/layer_norm.h)
// makes h and y, y already in the dtype the next matmul takes (bf16 under CPU
// autocast, where LibTorch would write fp32 and cast); its backward is one pass
// that makes the LayerNorm's gradient, adds the residual gradient, rounds the
// branch's copy to the branch's dtype and sums the weight and bias gradients
// (by blocks of rows in order: the same bits on any thread count). Elsewhere
// (CUDA, fp64 or fp16 streams) it is `x + r` and torch::layer_norm.
#include <torch/torch.h>

namespace prism {

struct AddNorm {
  torch::Tensor sum;     // h = x + r (x itself when r is undefined): the residual stream onwards
  torch::Tensor normed;  // y = LayerNorm(h)
};

// x: (..., d); r: x's shape, or undefined (no add); weight: (d); bias: (d) or undefined.
AddNorm add_layer_norm(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& weight,
                       const torch::Tensor& bias, double eps = 1e-5);

// Whether the fused kernel takes these (else add_layer_norm runs LibTorch's ops).
bool fused_add_layer_norm_fits(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& weight,
                               const torch::Tensor& bias);

// The Highway target the kernel runs on here ("AVX3_ZEN4", "AVX2", ...).
const char* layer_norm_cpu_target();

}  // namespace prism
