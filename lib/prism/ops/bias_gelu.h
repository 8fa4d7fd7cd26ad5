#pragma once
// The MLP's up-projection and activation, gelu(x W^T + b) with GPT-2's tanh GELU.
// On the CPU, in fp32 or bf16 (autocast included), the matmul runs without its
// bias and one kernel pass (kernels/cpu/bias_gelu.h) adds the bias and applies the
// GELU; its backward is one pass that makes the GELU's gradient and sums the
// bias gradient, in fp32, in an order independent of the thread count.
// LibTorch's own ops make three passes each way. Elsewhere (CUDA, other dtypes)
// it is torch::linear then GELU, as nanoGPT writes it.
#include <torch/torch.h>

namespace prism {

// x: (..., in); weight: (out, in); bias: (out) or undefined. Returns (..., out).
torch::Tensor linear_gelu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// gelu(h + bias) by the fused kernel, with its own backward (gradients to h and
// bias). h: a CPU fp32 or bf16 tensor (the bias-free matmul's output); bias: fp32
// or bf16 (out) or undefined. For tests and linear_gelu; check fused_bias_gelu_fits first.
torch::Tensor fused_bias_gelu(const torch::Tensor& h, const torch::Tensor& bias);
bool fused_bias_gelu_fits(const torch::Tensor& h, const torch::Tensor& bias);

// The Highway target the kernel runs on here ("AVX3_ZEN4", "AVX2", ...).
const char* bias_gelu_cpu_target();

}  // namespace prism
