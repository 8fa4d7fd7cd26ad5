#pragma once
// Ground truth for the kernel checks: causal attention in float64 with the explicit
// T x T probabilities, and attention distance straight from its definition
// sum_j p_ij (i - j) (docs/analysis.md, section 1). Differentiable, so autograd gives dq, dk, dv.
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace prism::device_bench {

struct ReferenceOut {
  torch::Tensor out, distance;  // (B, T, H, D), (B, H, T)
};

// q, k, v: (B, T, H, D) float64.
inline ReferenceOut reference_attention64(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(1), D = q.size(3);
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);
  auto scores = torch::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(D));
  auto mask = torch::ones({T, T}, torch::dtype(torch::kBool).device(q.device())).triu(1);
  auto p = torch::softmax(scores.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
  auto pos = torch::arange(T, torch::dtype(torch::kDouble).device(q.device()));
  auto gap = (pos.unsqueeze(1) - pos.unsqueeze(0)).clamp_min(0);
  return {torch::matmul(p, vh).transpose(1, 2), (p * gap).sum(-1)};
}

// ||got - want|| / ||want|| in float64; NaN when got has a non-finite entry (never passes).
inline double rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  auto g = got.to(torch::kDouble), w = want.to(torch::kDouble);
  if (!torch::isfinite(g).all().item<bool>()) return std::numeric_limits<double>::quiet_NaN();
  const double denom = w.norm().item<double>();
  return (g - w).norm().item<double>() / (denom > 0 ? denom : 1.0);
}

// Tolerances of test/cuda: bf16/fp16 inputs 2e-2, fp32 1e-4; distance (fp32 probabilities) 1e-3.
inline double tolerance(torch::ScalarType t) { return t == torch::kFloat ? 1e-4 : 2e-2; }
constexpr double kDistanceTolerance = 1e-3;

}  // namespace prism::device_bench
