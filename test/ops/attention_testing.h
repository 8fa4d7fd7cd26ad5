#pragma once
// Shared by the attention tests: inputs shaped like the model's (strided views
// of one fused qkv tensor), the fp64 ground truth, and tolerance checks that
// say where they failed.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>

#include "prism/ops/attention.h"

namespace prism::test {

struct Qkv {
  torch::Tensor qkv;      // (B, T, 3, H, D), the leaf
  torch::Tensor q, k, v;  // strided views of it, (B, T, H, D)
};

// Inputs as the model makes them: q, k, v are views of one (B, T, 3, H, D) tensor.
inline Qkv make_qkv(int64_t B, int64_t T, int64_t H, int64_t D, torch::ScalarType dtype, double scale = 1.0) {
  Qkv r;
  r.qkv = (torch::randn({B, T, 3, H, D}, torch::kDouble) * scale).to(dtype).requires_grad_();
  r.q = r.qkv.select(2, 0);
  r.k = r.qkv.select(2, 1);
  r.v = r.qkv.select(2, 2);
  return r;
}

using Attend = std::function<attention::Output(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

struct AttentionResult {
  torch::Tensor out, distance, dq, dk, dv;
};

// Runs `attend` on q, k, v (any dtype, gradients required) and backpropagates
// dout through the output.
inline AttentionResult run_with_grads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& dout, const Attend& attend) {
  auto qq = q.detach().requires_grad_(), kk = k.detach().requires_grad_(), vv = v.detach().requires_grad_();
  auto o = attend(qq, kk, vv);
  o.out.backward(dout.to(o.out.scalar_type()));
  return {o.out.detach(), o.distance, qq.grad(), kk.grad(), vv.grad()};
}

// The ground truth: the reference back end in fp64 on the same input values.
inline AttentionResult reference_fp64(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& dout) {
  return run_with_grads(q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble), dout.to(torch::kDouble),
                        [](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
                          return attention::reference_attention(a, b, c, 0.0, true);
                        });
}

// Elementwise |actual - expected| <= atol + rtol |expected|; on failure the
// message gives the worst element's excess.
inline void check_close(const std::string& what, const torch::Tensor& actual, const torch::Tensor& expected,
                        double rtol, double atol) {
  INFO(what);
  REQUIRE(actual.defined());
  REQUIRE(actual.sizes() == expected.sizes());
  auto a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  auto err = (a - e).abs();
  auto excess = err - (atol + rtol * e.abs());
  const double worst = excess.max().item<double>();
  const auto at = excess.argmax().item<int64_t>();
  INFO(fmt::format("max |error| {:.3g}, worst element: error {:.3g} vs bound {:.3g} (expected {:.6g}), rtol {} atol {:.3g}",
                   err.max().item<double>(), err.flatten()[at].item<double>(),
                   atol + rtol * e.abs().flatten()[at].item<double>(), e.flatten()[at].item<double>(), rtol, atol));
  CHECK(worst <= 0.0);
}

// fp32 criterion: 1e-5 absolute plus 1e-5 relative, against the fp64 truth.
inline void check_fp32(const std::string& what, const torch::Tensor& a, const torch::Tensor& e) {
  check_close(what, a, e, 1e-5, 1e-5);
}
// bf16 criterion: relative error 2e-2 in the Frobenius norm (outputs are
// rounded to bf16 and, as in FlashAttention and SDPA, delta = rowsum(dO * O)
// uses the rounded output, so single entries near zero are not judged
// relatively); plus a per-row guard so one wrong row cannot hide in a large
// tensor. A small absolute floor admits exact-zero tensors (T = 1: dq, dk).
inline void check_bf16(const std::string& what, const torch::Tensor& actual, const torch::Tensor& expected) {
  INFO(what);
  REQUIRE(actual.defined());
  REQUIRE(actual.sizes() == expected.sizes());
  auto a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  const double n = static_cast<double>(e.numel());
  const double err = (a - e).norm().item<double>(), ref = e.norm().item<double>();
  INFO(fmt::format("relative error {:.3g} (|error| {:.3g}, |expected| {:.3g})", err / std::max(ref, 1e-300), err, ref));
  CHECK(err <= 2e-2 * ref + 1e-4 * std::sqrt(n));
  auto row_err = (a - e).norm(2, {-1}), row_ref = e.norm(2, {-1});
  const double worst_row = row_err.max().item<double>(), mean_row = row_ref.mean().item<double>();
  INFO(fmt::format("worst row error {:.3g}, mean row norm {:.3g}", worst_row, mean_row));
  CHECK(worst_row <= 0.25 * mean_row + 1e-4);
}

}  // namespace prism::test
