#pragma once
// The one entry point for causal self-attention. The model calls only this;
// back ends (plain LibTorch reference, LibTorch SDPA, the fused CPU kernel,
// the CUDA kernel) plug in behind it. This folder, lib/prism/ops, is the only adapter
// between at::Tensor and kernels/.
#include <torch/torch.h>

#include <string>

#include "prism/config/attention_backend.h"

namespace prism::attention {

struct Options {
  Backend backend = Backend::Auto;
  double dropout_p = 0.0;     // on attention probabilities (training only)
  bool want_distance = false; // also return sum_j p_ij (i - j) per (b, h, i)
};

struct Output {
  torch::Tensor out;       // (B, T, H, D), same dtype as q
  torch::Tensor distance;  // (B, H, T) float32 when requested, else undefined
};

// q, k, v: (B, T, H, D), unit stride along D (strided views of a fused qkv
// projection are accepted as they are). Causal: query i sees keys j <= i.
Output causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const Options& opt = {});

// What `auto` (or an explicit request) resolves to for these inputs. Auto on
// the CPU: the fused kernel for fp32/bf16 without dropout when the CPU's code
// path is one where the kernel was measured beating SDPA (AVX2 + FMA, AVX-512,
// AVX-512-BF16; cpu_code_paths.h), and it reports distance; otherwise SDPA, or
// the reference when distance is wanted. Throws prism::Error when an explicit
// back end cannot serve the request (SDPA with distance, fused with dropout or
// an unsupported dtype or device, CUDA not built).
Backend resolve_backend(const Options& opt, const torch::Tensor& q);

// Whether a back end can report attention distance.
bool supports_distance(Backend b);

// The plain-math ground truth: matmul, causal mask, softmax, matmul.
Output reference_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           double dropout_p, bool want_distance);

// at::scaled_dot_product_attention on (B, H, T, D) views; no distance.
Output sdpa_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double dropout_p);

}  // namespace prism::attention
