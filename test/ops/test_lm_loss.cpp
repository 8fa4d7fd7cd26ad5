#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "prism/ops/lm_loss.h"
#include "prism/train/execution.h"

using namespace prism;
namespace F = torch::nn::functional;

namespace {
struct Grads {
  torch::Tensor loss, gx, gw;
};

Grads plain(const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& t) {
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  auto loss = F::cross_entropy(F::linear(x, w).to(torch::kFloat), t, F::CrossEntropyFuncOptions().ignore_index(-1));
  loss.backward();
  return {loss.detach(), x.grad(), w.grad()};
}

Grads fused(const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& t, int64_t chunk,
            int64_t keep_bytes = kLmKeepLogitsBytes) {
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  auto loss = lm_head_cross_entropy(x, w, t, chunk, keep_bytes);
  loss.backward();
  return {loss.detach(), x.grad(), w.grad()};
}

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max() / b.to(torch::kDouble).abs().max().clamp_min(1e-30))
      .item<double>();
}
}  // namespace

TEST_CASE("fused LM-head cross-entropy equals linear + cross_entropy, fp32", "[model][lm_loss]") {
  torch::manual_seed(0);
  const int64_t N = 37, d = 24, V = 1000;
  auto x = torch::randn({N, d}), w = torch::randn({V, d}) * 0.3;
  auto t = torch::randint(0, V, {N}, torch::kLong);
  t[3] = -1;  // ignored
  t[5] = V - 1;
  t[6] = 0;
  auto ref = plain(x, w, t);
  // Logits kept for the backward (they fit) and recomputed chunk by chunk (budget 0).
  for (int64_t keep : {kLmKeepLogitsBytes, int64_t{0}})
    for (int64_t chunk : {64, 333, 1000, 4096}) {  // chunks that do and do not divide V
      INFO("chunk " << chunk << ", keep logits up to " << keep << " bytes");
      auto got = fused(x, w, t, chunk, keep);
      CHECK(std::abs(got.loss.item<double>() - ref.loss.item<double>()) < 1e-5);
      CHECK((got.gx - ref.gx).abs().max().item<double>() < 1e-6);
      CHECK((got.gw - ref.gw).abs().max().item<double>() < 1e-6);
    }
  // Every target ignored: loss 0 and zero gradients, not NaN.
  for (int64_t keep : {kLmKeepLogitsBytes, int64_t{0}}) {
    auto none = fused(x, w, torch::full({N}, -1, torch::kLong), 128, keep);
    CHECK(none.loss.item<double>() == 0.0);
    CHECK(none.gw.abs().max().item<double>() == 0.0);
    CHECK(none.gx.abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("fused LM-head cross-entropy under bf16 autocast matches fp32 within bf16 precision", "[model][lm_loss]") {
  torch::manual_seed(1);
  const int64_t N = 64, d = 32, V = 3000;
  auto x = torch::randn({N, d}), w = torch::randn({V, d}) * 0.2;
  auto t = torch::randint(0, V, {N}, torch::kLong);
  auto ref = plain(x, w, t);
  Execution e;
  e.bf16 = true;
  // as<int64_t>: by value (an lvalue first argument makes Catch2 v2 keep a reference to it).
  const int64_t keep = GENERATE(as<int64_t>{}, kLmKeepLogitsBytes, 0);
  INFO("keep logits up to " << keep << " bytes");
  Grads got;
  {
    AutocastScope ac(e);
    auto xx = x.clone().requires_grad_(true), ww = w.clone().requires_grad_(true);
    auto loss = lm_head_cross_entropy(xx, ww, t, 512, keep);
    CHECK(loss.scalar_type() == torch::kFloat);
    got.loss = loss.detach();
    loss.backward();
    got.gx = xx.grad();
    got.gw = ww.grad();
  }
  CHECK(got.gx.scalar_type() == torch::kFloat);  // gradients in the inputs' dtype
  CHECK(std::abs(got.loss.item<double>() - ref.loss.item<double>()) < 2e-2 * ref.loss.item<double>());
  CHECK(rel(got.gx, ref.gx) < 2e-2);
  CHECK(rel(got.gw, ref.gw) < 2e-2);
  // ... and the matmuls really ran in bf16: fp32 would agree to ~1e-6.
  CHECK(rel(got.gx, ref.gx) > 1e-4);
  CHECK(std::abs(got.loss.item<double>() - ref.loss.item<double>()) > 1e-6 * ref.loss.item<double>());
}

TEST_CASE("fused LM-head cross-entropy keeps no logits without a backward to come", "[model][lm_loss]") {
  // Evaluation (no grad mode) takes the chunk loop whatever the budget, and agrees with training's value.
  torch::manual_seed(2);
  const int64_t N = 16, d = 8, V = 700;
  auto x = torch::randn({N, d}), w = torch::randn({V, d}), t = torch::randint(0, V, {N}, torch::kLong);
  const double train = lm_head_cross_entropy(x.requires_grad_(true), w, t, 128).item<double>();
  torch::NoGradGuard no_grad;
  const double eval = lm_head_cross_entropy(x, w, t, 128).item<double>();
  CHECK(std::abs(train - eval) < 1e-6);
}

TEST_CASE("fused LM-head cross-entropy: two forwards before one backward keep their own logits", "[model][lm_loss]") {
  // The kept logits live in a buffer reused across steps; a second forward while the
  // first's are still held must not overwrite them.
  torch::manual_seed(3);
  const int64_t N = 24, d = 16, V = 900;
  auto x1 = torch::randn({N, d}), x2 = torch::randn({N, d}), w = torch::randn({V, d}) * 0.3;
  auto t1 = torch::randint(0, V, {N}, torch::kLong), t2 = torch::randint(0, V, {N}, torch::kLong);
  auto ref1 = plain(x1, w, t1), ref2 = plain(x2, w, t2);
  auto a = x1.clone().requires_grad_(true), b = x2.clone().requires_grad_(true), ww = w.clone().requires_grad_(true);
  auto l1 = lm_head_cross_entropy(a, ww, t1, 256), l2 = lm_head_cross_entropy(b, ww, t2, 256);
  (l1 + l2).backward();
  CHECK((a.grad() - ref1.gx).abs().max().item<double>() < 1e-6);
  CHECK((b.grad() - ref2.gx).abs().max().item<double>() < 1e-6);
  CHECK((ww.grad() - (ref1.gw + ref2.gw)).abs().max().item<double>() < 1e-6);
  // And a step after that reuses the buffer correctly again.
  auto c = x1.clone().requires_grad_(true);
  lm_head_cross_entropy(c, w, t1, 256).backward();
  CHECK((c.grad() - ref1.gx).abs().max().item<double>() < 1e-6);
}

TEST_CASE("per-token LM-head losses equal cross_entropy without reduction, in row chunks, with gradients",
          "[model][lm_loss]") {
  torch::manual_seed(3);
  const int64_t N = 29, d = 16, V = 300;
  auto x = torch::randn({N, d}), w = torch::randn({V, d}) * 0.3;
  auto t = torch::randint(0, V, {N}, torch::kLong);
  t[4] = -1;  // ignored: loss 0, no gradient
  t[17] = -5;
  auto want = F::cross_entropy(F::linear(x, w), t.clamp_min(-1),
                               F::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kNone));
  // 7 rows of V fp32 logits per chunk: 5 chunks, the last one short.
  for (int64_t bytes : {int64_t{64} << 20, 7 * V * 4, int64_t{1}}) {
    INFO("max_logit_bytes " << bytes);
    auto xg = x.clone().requires_grad_(true), wg = w.clone().requires_grad_(true);
    auto got = lm_head_token_losses(xg, wg, t, bytes);
    REQUIRE(got.sizes() == torch::IntArrayRef{N});
    CHECK(got.scalar_type() == torch::kFloat);
    CHECK(rel(got, want) < 1e-6);
    CHECK(got[4].item<float>() == 0.0f);
    CHECK(got[17].item<float>() == 0.0f);
    // The mean over counted tokens has the fused loss's gradients.
    (got.sum() / (N - 2)).backward();
    Grads ref = plain(x, w, t.clamp_min(-1));
    CHECK(rel(xg.grad(), ref.gx) < 1e-5);
    CHECK(rel(wg.grad(), ref.gw) < 1e-5);
    CHECK(xg.grad()[4].abs().max().item<float>() == 0.0f);
  }
}
