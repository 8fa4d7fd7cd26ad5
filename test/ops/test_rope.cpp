// Rotary position embedding: the kernel (kernels/cpu/rope.h) on every Highway
// target this CPU runs against its scalar reference, the reference against the
// closed form, and the autograd op (prism/ops/rope.h) against Hugging Face's
// formula in plain LibTorch ops, gradients included, on the strided q and k
// views of a fused qkv projection.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>

#include "cpu/rope.h"
#include "error_checks.h"
#include "prism/ops/rope.h"

namespace kc = prism::kernels::cpu;

namespace {

struct ForcedTarget {
  explicit ForcedTarget(const std::string& name) { kc::rope_force_target(name); }
  ~ForcedTarget() { kc::rope_force_target(""); }
};

kc::RopeView view_of(const torch::Tensor& t) { return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)}; }

double max_err(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
}

// y = rotate(x) by the kernel (or its reference): x, y (B, T, H, D) views.
void run_kernel(bool reference, const torch::Tensor& x, const torch::Tensor& y, const prism::RopeTable& table,
                bool inverse) {
  kc::RopeParams p;
  p.type = x.scalar_type() == torch::kFloat ? kc::RowType::F32 : kc::RowType::BF16;
  p.B = x.size(0);
  p.T = x.size(1);
  p.H = x.size(2);
  p.D = x.size(3);
  p.cos = table.cos.data_ptr<float>();
  p.sin = table.sin.data_ptr<float>();
  p.tensors = 1;
  p.x[0] = view_of(x);
  p.y[0] = view_of(y);
  p.inverse = inverse;
  if (reference) kc::reference::rope_apply(p);
  else kc::rope_apply(p);
}

// Hugging Face Llama's formula in double: x cos + rotate_half(x) sin, angles t theta^(-2c/D).
torch::Tensor closed_form(const torch::Tensor& x, double theta, bool inverse) {
  const int64_t T = x.size(1), D = x.size(3), half = D / 2;
  auto xd = x.to(torch::kDouble);
  auto c = torch::arange(half, torch::kDouble);
  auto angle = torch::outer(torch::arange(T, torch::kDouble), torch::pow(theta, -2.0 * c / static_cast<double>(D)));
  if (inverse) angle = -angle;
  auto emb = torch::cat({angle, angle}, 1).unsqueeze(1);  // (T, 1, D)
  auto rot = torch::cat({-xd.narrow(3, half, half), xd.narrow(3, 0, half)}, 3);
  return xd * emb.cos() + rot * emb.sin();
}

}  // namespace

TEST_CASE("rope table: cos and sin of t theta^(-2c/D), computed in double and rounded once", "[ops][rope]") {
  const auto t = prism::rope_table(8192, 64, 10000.0);
  REQUIRE(t.cos.sizes() == torch::IntArrayRef({8192, 32}));
  CHECK(t.positions() == 8192);
  CHECK(t.head_dim() == 64);
  for (int64_t pos : {0, 1, 777, 8191})
    for (int64_t c : {0, 5, 31}) {
      const double angle = static_cast<double>(pos) * std::pow(10000.0, -2.0 * static_cast<double>(c) / 64.0);
      CHECK(t.cos[pos][c].item<float>() == static_cast<float>(std::cos(angle)));
      CHECK(t.sin[pos][c].item<float>() == static_cast<float>(std::sin(angle)));
    }
  prism::test::require_error([] { prism::rope_table(16, 7, 10000.0); }, {"head width 7", "even head width"});
  prism::test::require_error([] { prism::rope_table(16, 8, 0.0); }, {"theta 0", "theta > 0"});
}

TEST_CASE("rope kernels: every SIMD target and the reference against the closed form, forward and inverse",
          "[ops][rope][kernels]") {
  const auto targets = kc::rope_targets();
  REQUIRE(!targets.empty());
  const auto dtype = GENERATE(torch::kFloat, torch::kBFloat16);
  // Half-widths of whole vectors, of 8- and 4-lane pieces and of single pairs: 1, 4, 8, 13, 16, 32, 64 pairs.
  const int64_t D = GENERATE(2, 8, 16, 26, 32, 64, 128);
  const bool inverse = GENERATE(false, true);
  torch::manual_seed(D + (inverse ? 1 : 0));
  const int64_t B = 2, T = 37, H = 3;
  const double theta = 10000.0;
  const auto table = prism::rope_table(T, D, theta);
  // q and k as views of a fused projection's (B, T, 3, H, D) output.
  auto qkv = torch::randn({B, T, 3, H, D}).to(dtype);
  auto q = qkv.select(2, 0), k = qkv.select(2, 1);
  const auto want_q = closed_form(q, theta, inverse), want_k = closed_form(k, theta, inverse);
  // fp32: a few ulp of the (already fp32-rounded) angles; bf16: one rounding of the result.
  const double tol = dtype == torch::kFloat ? 2e-6 : 1.0 / 128;

  auto run = [&](bool reference) {
    auto out = torch::full({B, T, H, D}, 7.0f).to(dtype);
    run_kernel(reference, q, out, table, inverse);
    CHECK(max_err(out, want_q) < tol * std::max(1.0, want_q.abs().max().item<double>()));
    // Two tensors in one call, one of them written in place over a strided input.
    auto qkv2 = qkv.clone();
    auto q2 = qkv2.select(2, 0), k2 = qkv2.select(2, 1), kout = torch::empty({B, T, H, D}, dtype);
    kc::RopeParams p;
    p.type = dtype == torch::kFloat ? kc::RowType::F32 : kc::RowType::BF16;
    p.B = B, p.T = T, p.H = H, p.D = D;
    p.cos = table.cos.data_ptr<float>();
    p.sin = table.sin.data_ptr<float>();
    p.tensors = 2;
    p.x[0] = view_of(q2), p.y[0] = view_of(q2);
    p.x[1] = view_of(k2), p.y[1] = view_of(kout);
    p.inverse = inverse;
    if (reference) kc::reference::rope_apply(p);
    else kc::rope_apply(p);
    CHECK(torch::equal(q2, out));
    CHECK(max_err(kout, want_k) < tol * std::max(1.0, want_k.abs().max().item<double>()));
    CHECK(torch::equal(qkv2.select(2, 2), qkv.select(2, 2)));  // v, beside them: untouched
    CHECK(torch::equal(k2, k));                                // an input that is not an output: untouched
  };
  SECTION("scalar reference") { run(true); }
  for (const auto& name : targets) {
    DYNAMIC_SECTION("target " << name) {
      ForcedTarget forced(name);
      CHECK(std::string(kc::rope_target()) == name);
      run(false);
    }
  }
}

TEST_CASE("rope op: the fused kernel against Hugging Face's formula in LibTorch ops, gradients included",
          "[ops][rope]") {
  torch::manual_seed(21);
  const bool bf16 = GENERATE(false, true);
  const int64_t B = 2, T = 19, H = 4, D = 32;
  const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
  const auto table = prism::rope_table(64, D, 500000.0);  // longer than T: the op takes its first T rows
  auto qkv0 = torch::randn({B, T, 3, H, D}).to(dtype);
  auto gq = torch::randn({B, T, H, D}).to(dtype), gk = torch::randn({B, T, H, D}).to(dtype);
  auto run = [&](bool fused) {
    auto qkv = qkv0.clone().requires_grad_(true);
    auto q = qkv.select(2, 0), k = qkv.select(2, 1);
    prism::RotatedQK r;
    if (fused) {
      REQUIRE(prism::fused_rope_fits(q, k));
      r = prism::apply_rope(q, k, table);
    } else {
      r = {prism::rope_by_ops(q, table), prism::rope_by_ops(k, table)};
    }
    CHECK(r.q.scalar_type() == dtype);
    ((r.q * gq).sum() + (r.k * gk).sum()).backward();
    return std::vector<torch::Tensor>{r.q.detach(), r.k.detach(), qkv.grad()};
  };
  const auto fused = run(true), ops = run(false);
  // bf16: Hugging Face rounds cos and sin to bf16 and multiplies in bf16; the kernel rounds once.
  const double tol = bf16 ? 4e-2 : 2e-6;
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("output " << i << " (q, k, d qkv)");
    CHECK(max_err(fused[i], ops[i]) < tol * std::max(1.0, ops[i].abs().max().item<double>()));
  }
  CHECK(fused[2].select(2, 2).abs().max().item<double>() == 0.0);  // v gets no gradient from the rotation
  // The backward is the inverse rotation: rotating the gradient back recovers it exactly up to rounding.
  CHECK(max_err(fused[2].select(2, 0), closed_form(gq, 500000.0, true)) < tol * 8);
}

TEST_CASE("rope op: fp64 takes LibTorch's ops, and tensors that do not fit the table are refused", "[ops][rope]") {
  torch::manual_seed(4);
  const auto table = prism::rope_table(10, 8, 10000.0);
  auto q = torch::randn({1, 10, 2, 8}, torch::kDouble), k = torch::randn({1, 10, 2, 8}, torch::kDouble);
  CHECK_FALSE(prism::fused_rope_fits(q, k));
  const auto r = prism::apply_rope(q, k, table);
  CHECK(max_err(r.q, closed_form(q, 10000.0, false)) < 1e-6);
  prism::test::require_error([&] { prism::apply_rope(torch::randn({1, 11, 2, 8}), torch::randn({1, 11, 2, 8}), table); },
                             {"11 positions", "rope_table"});
  prism::test::require_error([&] { prism::apply_rope(torch::randn({1, 10, 1, 16}), torch::randn({1, 10, 1, 16}), table); },
                             {"head width 16"});
  CHECK(std::string(prism::rope_cpu_target()) == kc::rope_targets().front());
}
