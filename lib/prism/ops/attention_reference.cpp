// Ground truth for every other back end: explicit T x T probabilities.
#include <cmath>

#include "prism/ops/attention.h"

namespace prism::attention {

Output reference_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           double dropout_p, bool want_distance) {
  const int64_t T = q.size(1), D = q.size(3);
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);  // (B, H, T, D)
  auto scores = torch::matmul(qh, kh.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
  auto mask = torch::ones({T, T}, torch::dtype(torch::kBool).device(q.device())).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  // Softmax in at least fp32 whatever the input dtype, as the fused kernels do
  // (fp64 inputs keep fp64: tests use that as the ground truth).
  auto probs = torch::softmax(scores.to(at::promote_types(scores.scalar_type(), torch::kFloat)), -1);
  Output res;
  if (want_distance) {
    torch::NoGradGuard no_grad;
    // sum_j p_ij (i - j) as it is: i - sum_j p_ij j would cancel catastrophically
    // for a local head at large i (one more T x T temporary, here where T x T is the point).
    auto pos = torch::arange(T, torch::dtype(probs.scalar_type()).device(q.device()));
    auto lag = (pos.unsqueeze(1) - pos.unsqueeze(0)).clamp_min(0);  // (T, T): i - j, 0 above the diagonal
    res.distance = (probs * lag).sum(-1).to(torch::kFloat);
  }
  auto p = probs.to(q.scalar_type());
  if (dropout_p > 0.0) p = torch::dropout(p, dropout_p, /*train=*/true);
  res.out = torch::matmul(p, vh).transpose(1, 2);  // (B, T, H, D)
  return res;
}

}  // namespace prism::attention
