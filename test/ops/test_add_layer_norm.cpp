// The residual add + LayerNorm: the kernels (kernels/cpu/layer_norm.h) on every
// Highway target this CPU runs and their scalar reference against LibTorch math in
// double, and the autograd op (prism/ops/add_layer_norm.h) against `x + r` and
// torch::layer_norm, gradients included, in fp32 and under bf16 autocast.
#include <catch2/catch.hpp>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cstring>

#include "cpu/layer_norm.h"
#include "prism/ops/add_layer_norm.h"

namespace kc = prism::kernels::cpu;

namespace {

kc::Rows rows_of(const torch::Tensor& t) {
  return {t.data_ptr(), t.scalar_type() == torch::kFloat ? kc::RowType::F32 : kc::RowType::BF16, t.size(0), t.size(1),
          t.stride(0)};
}

struct ForcedTarget {
  explicit ForcedTarget(const std::string& name) { kc::layer_norm_force_target(name); }
  ~ForcedTarget() { kc::layer_norm_force_target(""); }
};

// The largest error relative to max(1, |want|), element by element.
double max_rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  const auto w = want.to(torch::kDouble);
  return ((got.to(torch::kDouble) - w).abs() / w.abs().clamp_min(1.0)).max().item<double>();
}

// A (rows, cols) view of a (rows, cols + 3) buffer: the kernels must leave the 3 past each row alone.
torch::Tensor padded(const torch::Tensor& buf, int64_t cols) { return buf.narrow(1, 0, cols); }
bool pad_untouched(const torch::Tensor& buf, const torch::Tensor& before, int64_t cols) {
  return torch::equal(buf.narrow(1, cols, buf.size(1) - cols), before.narrow(1, cols, before.size(1) - cols));
}

struct AutocastBf16 {
  explicit AutocastBf16(bool on) {
    at::autocast::set_autocast_enabled(torch::kCPU, on);
    at::autocast::set_autocast_dtype(torch::kCPU, torch::kBFloat16);
  }
  ~AutocastBf16() {
    at::autocast::set_autocast_enabled(torch::kCPU, false);
    at::autocast::clear_cache();
  }
};

}  // namespace

TEST_CASE("add + LayerNorm kernels: every SIMD target and the reference against LibTorch in double",
          "[model][layer_norm][kernels]") {
  const auto targets = kc::layer_norm_targets();
  REQUIRE(!targets.empty());
  const auto branch = GENERATE(torch::kFloat, torch::kBFloat16);  // the type of r, y, dy and dr
  const int64_t cols = GENERATE(1, 15, 16, 333, 768);
  const bool with_r = GENERATE(true, false);
  const bool with_beta = GENERATE(true, false);
  torch::manual_seed(cols * 4 + (with_r ? 2 : 0) + (with_beta ? 1 : 0));
  const int64_t N = 70, ld = cols + 3;  // 70 rows: three blocks of the gamma/beta sums, the last partial
  auto xbuf = torch::randn({N, ld}) * 2 + 0.5, rbuf = torch::randn({N, ld}).to(branch);
  auto dybuf = torch::randn({N, ld}).to(branch), dhbuf = torch::randn({N, ld});
  auto x = padded(xbuf, cols), r = padded(rbuf, cols), dy = padded(dybuf, cols), dh = padded(dhbuf, cols);
  auto gamma = torch::randn({cols}) * 0.5 + 1, beta = torch::randn({cols});
  const float* beta_p = with_beta ? beta.data_ptr<float>() : nullptr;
  const float eps = 1e-5f;

  // LibTorch in double, from the fp32 sum the kernels keep.
  auto h_want = with_r ? x + r.to(torch::kFloat) : x.clone();
  auto hd = h_want.to(torch::kDouble).requires_grad_(true);
  auto gd = gamma.to(torch::kDouble).requires_grad_(true), bd = beta.to(torch::kDouble).requires_grad_(true);
  auto y_want = torch::layer_norm(hd, {cols}, gd, with_beta ? bd : torch::Tensor(), eps);
  y_want.backward(dy.to(torch::kDouble));
  auto dx_want = hd.grad() + (with_r ? dh.to(torch::kDouble) : torch::zeros_like(hd));
  const auto var = h_want.to(torch::kDouble).var(1, /*unbiased=*/false);
  const double tol = branch == torch::kFloat ? 2e-5 : 1.0 / 128;

  auto run = [&](bool reference) {
    auto hbuf = torch::full({N, ld}, -3.0f), ybuf = torch::full({N, ld}, 5.0).to(branch);
    auto hbuf0 = hbuf.clone(), ybuf0 = ybuf.clone();
    auto h = padded(hbuf, cols), y = padded(ybuf, cols);
    auto mean = torch::empty({N}), rstd = torch::empty({N});
    const kc::Rows xr = rows_of(x), rr = rows_of(r), hr = rows_of(h);
    auto fwd = reference ? kc::reference::add_layer_norm_forward : kc::add_layer_norm_forward;
    fwd(xr, with_r ? &rr : nullptr, with_r ? &hr : nullptr, gamma.data_ptr<float>(), beta_p, eps, rows_of(y),
        mean.data_ptr<float>(), rstd.data_ptr<float>());
    if (with_r) CHECK(torch::equal(h, h_want));  // the residual sum is fp32's x + r, bit for bit
    else CHECK(torch::equal(hbuf, hbuf0));       // no sum written without r
    CHECK(max_rel_err(y, y_want.detach()) < tol);
    CHECK(max_rel_err(mean, h_want.to(torch::kDouble).mean(1)) < 1e-5);
    CHECK(max_rel_err(rstd, (var + eps).rsqrt()) < 1e-4);
    CHECK(pad_untouched(ybuf, ybuf0, cols));
    CHECK(pad_untouched(hbuf, hbuf0, cols));

    const auto& hs = with_r ? h : x;
    auto dxbuf = torch::full({N, ld}, 7.0f), drbuf = torch::full({N, ld}, 9.0).to(branch);
    auto dxbuf0 = dxbuf.clone(), drbuf0 = drbuf.clone();
    auto dx = padded(dxbuf, cols), dr = padded(drbuf, cols);
    auto dgamma = torch::full({cols}, -1.0f), dbeta = torch::full({cols}, -1.0f);
    const kc::Rows dhr = rows_of(dh), drr = rows_of(dr);
    auto bwd = reference ? kc::reference::add_layer_norm_backward : kc::add_layer_norm_backward;
    bwd(rows_of(dy), with_r ? &dhr : nullptr, rows_of(hs), mean.data_ptr<float>(), rstd.data_ptr<float>(),
        gamma.data_ptr<float>(), rows_of(dx), with_r ? &drr : nullptr, dgamma.data_ptr<float>(),
        beta_p ? dbeta.data_ptr<float>() : nullptr);
    // fp32 arithmetic over rows whose xhat reaches ~3: 1e-4 of the row's scale.
    const double gtol = branch == torch::kFloat ? 1e-4 : 1.0 / 64;
    CHECK(max_rel_err(dx, dx_want) < gtol);
    if (with_r) CHECK(torch::equal(dr, dx.to(branch)));  // the branch's gradient: dx rounded once
    else CHECK(torch::equal(drbuf, drbuf0));
    const double gscale = std::max(1.0, gd.grad().abs().max().item<double>());
    CHECK((dgamma.to(torch::kDouble) - gd.grad()).abs().max().item<double>() < 1e-4 * gscale);
    if (with_beta) CHECK(max_rel_err(dbeta, bd.grad()) < 1e-4 * std::max(1.0, bd.grad().abs().max().item<double>()));
    else CHECK(torch::equal(dbeta, torch::full({cols}, -1.0f)));
    CHECK(pad_untouched(dxbuf, dxbuf0, cols));
    CHECK(pad_untouched(drbuf, drbuf0, cols));
  };
  SECTION("scalar reference") { run(true); }
  for (const auto& name : targets) {
    DYNAMIC_SECTION("target " << name) {
      ForcedTarget forced(name);
      CHECK(std::string(kc::layer_norm_target()) == name);
      run(false);
    }
  }
}

TEST_CASE("add + LayerNorm kernel: the weight and bias gradients are the same bits on any thread count",
          "[model][layer_norm][kernels]") {
  torch::manual_seed(5);
  const int64_t N = 1000, C = 768;  // 32 blocks of rows
  auto h = torch::randn({N, C}), dy = torch::randn({N, C}).to(torch::kBFloat16), gamma = torch::randn({C});
  auto mean = h.mean(1), rstd = (h.var(1, false) + 1e-5).rsqrt();
  auto run = [&](int threads) {
    const int before = torch::get_num_threads();
    torch::set_num_threads(threads);
    auto dx = torch::empty_like(h), dgamma = torch::empty({C}), dbeta = torch::empty({C});
    kc::add_layer_norm_backward(rows_of(dy), nullptr, rows_of(h), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                                gamma.data_ptr<float>(), rows_of(dx), nullptr, dgamma.data_ptr<float>(),
                                dbeta.data_ptr<float>());
    torch::set_num_threads(before);
    return torch::cat({dgamma, dbeta, dx.flatten()});
  };
  auto one = run(1), two = run(2), three = run(3);
  CHECK(std::memcmp(one.data_ptr(), two.data_ptr(), one.numel() * sizeof(float)) == 0);
  CHECK(std::memcmp(one.data_ptr(), three.data_ptr(), one.numel() * sizeof(float)) == 0);
}

TEST_CASE("add + LayerNorm: the fused op against x + r and torch::layer_norm, gradients included",
          "[model][layer_norm]") {
  torch::manual_seed(17);
  const int64_t B = 3, T = 21, C = 96;
  const bool bf16 = GENERATE(false, true);  // under bf16 autocast the branch r is bf16, as a matmul leaves it
  const bool with_r = GENERATE(true, false);
  const bool with_bias = GENERATE(true, false);
  // Which outputs the loss reads: both, the normalised one alone, the sum alone.
  const int uses = GENERATE(0, 1, 2);
  if (!with_r && uses == 2) return;  // without r the sum is x itself
  auto x0 = torch::randn({B, T, C}) * 1.5, r0 = torch::randn({B, T, C}).to(bf16 ? torch::kBFloat16 : torch::kFloat);
  auto w0 = torch::randn({C}) * 0.3 + 1, b0 = torch::randn({C}) * 0.2;
  auto gy = torch::randn({B, T, C}), gh = torch::randn({B, T, C});
  auto grads = [&](bool fused) {
    auto x = x0.clone().requires_grad_(true), r = r0.clone().requires_grad_(true);
    auto w = w0.clone().requires_grad_(true);
    auto b = with_bias ? b0.clone().requires_grad_(true) : torch::Tensor();
    prism::AddNorm o;
    {
      AutocastBf16 autocast(bf16);
      const auto rr = with_r ? r : torch::Tensor();
      if (fused) {
        REQUIRE(prism::fused_add_layer_norm_fits(x, rr, w, b));
        o = prism::add_layer_norm(x, rr, w, b);
      } else {
        o.sum = with_r ? x + rr : x;
        o.normed = torch::layer_norm(o.sum, {C}, w, b, 1e-5);
      }
    }
    if (fused) {
      // Under bf16 autocast the output is the next matmul's dtype; LibTorch's is fp32 (cast later).
      CHECK(o.normed.scalar_type() == (bf16 ? torch::kBFloat16 : torch::kFloat));
      CHECK(o.sum.scalar_type() == torch::kFloat);
    }
    auto normed = bf16 ? o.normed.to(torch::kBFloat16).to(torch::kFloat) : o.normed;  // the same rounding both ways
    torch::Tensor loss = torch::zeros({});
    if (uses != 2) loss = loss + (normed * gy).sum();
    if (uses != 1) loss = loss + (o.sum * gh).sum();
    loss.backward();
    std::vector<torch::Tensor> out{normed.detach(), o.sum.detach(), x.grad(), w.grad()};
    if (with_r) out.push_back(r.grad());
    if (with_bias) out.push_back(b.grad());
    return out;
  };
  auto fused = grads(true), plain = grads(false);
  REQUIRE(fused.size() == plain.size());
  const char* names[] = {"normed", "sum", "x.grad", "weight.grad", "r.grad or bias.grad", "bias.grad"};
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO(names[i] << " bf16=" << bf16 << " with_r=" << with_r << " uses=" << uses);
    if (!plain[i].defined()) {  // the weight has no gradient when only the sum is used
      CHECK(!fused[i].defined());
      continue;
    }
    REQUIRE(fused[i].defined());
    CHECK(fused[i].scalar_type() == plain[i].scalar_type());
    // bf16: the normalised output rounds to bf16 on both sides; fp32 sums in another order.
    const double tol = bf16 ? 1.0 / 64 : 1e-5;
    CHECK(max_rel_err(fused[i], plain[i]) < tol);
  }
}

TEST_CASE("add + LayerNorm: CUDA, fp64 and fp16 streams take LibTorch's ops", "[model][layer_norm]") {
  auto x = torch::randn({4, 8}, torch::kDouble), w = torch::ones({8}, torch::kDouble);
  CHECK_FALSE(prism::fused_add_layer_norm_fits(x, torch::Tensor(), w, torch::Tensor()));
  auto o = prism::add_layer_norm(x, x, w, torch::Tensor());
  CHECK(torch::allclose(o.normed, torch::layer_norm(x + x, {8}, w, torch::Tensor(), 1e-5)));
  CHECK(prism::fused_add_layer_norm_fits(x.to(torch::kFloat), x.to(torch::kBFloat16), w.to(torch::kFloat),
                                         torch::Tensor()));
  CHECK_FALSE(prism::fused_add_layer_norm_fits(x.to(torch::kFloat), torch::randn({4, 9}), w.to(torch::kFloat),
                                               torch::Tensor()));  // r of another shape
  CHECK(std::string(prism::layer_norm_cpu_target()) == kc::layer_norm_targets().front());
}
