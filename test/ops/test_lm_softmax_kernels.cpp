// The LM head's row-softmax kernels (kernels/cpu/lm_softmax.h) on every Highway
// target this CPU runs, against their scalar reference and plain LibTorch math.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "cpu/lm_softmax.h"

namespace kc = prism::kernels::cpu;

namespace {

kc::LogitRows rows_of(torch::Tensor& l) {
  return {l.data_ptr(), l.scalar_type() == torch::kFloat ? kc::LogitType::F32 : kc::LogitType::BF16, l.size(0),
          l.size(1), l.stride(0)};
}

// Resets the dispatcher to this CPU's best target when a test ends.
struct ForcedTarget {
  explicit ForcedTarget(const std::string& name) { kc::lm_softmax_force_target(name); }
  ~ForcedTarget() { kc::lm_softmax_force_target(""); }
};

}  // namespace

TEST_CASE("LM-head softmax kernels: every SIMD target against the reference and LibTorch", "[model][lm_loss][kernels]") {
  const auto targets = kc::lm_softmax_targets();
  REQUIRE(!targets.empty());
  const auto dtype = GENERATE(torch::kFloat, torch::kBFloat16);
  // Row lengths that are and are not whole vectors, a row stride past the row's end (a chunk of a wider buffer).
  const int64_t cols = GENERATE(1, 15, 16, 333, 2048);
  torch::manual_seed(cols);
  const int64_t N = 37, ld = cols + 5, offset = 1000;
  auto buffer = (torch::randn({N, ld}) * 4).to(dtype);
  auto l = buffer.narrow(1, 0, cols);
  // Targets: in this chunk, before it, after it, and ignored (-1).
  auto t = torch::randint(offset, offset + cols, {N}, torch::kLong);
  t[0] = -1;
  t[1] = offset - 1;
  t[2] = offset + cols;
  t[3] = offset + cols - 1;
  auto lf = l.to(torch::kDouble);
  // LibTorch math: lse over a running start (m0, s0) and this chunk.
  auto m0 = torch::randn({N}).to(torch::kFloat), s0 = torch::rand({N}).add_(0.5).to(torch::kFloat);
  auto lse_ref = torch::logaddexp(m0.to(torch::kDouble) + s0.to(torch::kDouble).log(), torch::logsumexp(lf, 1));
  auto tc = (t - offset);
  auto in = (tc >= 0) & (tc < cols);
  auto scale = torch::rand({N}).add_(0.1);
  auto lse = lse_ref.to(torch::kFloat).contiguous();
  auto onehot = torch::zeros({N, cols}, torch::kDouble).scatter_(1, tc.clamp(0, cols - 1).unsqueeze(1), 1.0) *
                in.to(torch::kDouble).unsqueeze(1);
  auto grad_ref = ((lf - lse.to(torch::kDouble).unsqueeze(1)).exp() - onehot) * scale.to(torch::kDouble).unsqueeze(1);
  const double tol = dtype == torch::kFloat ? 2e-6 : 8e-3;  // bf16: the stored gradient's rounding

  auto run = [&](bool reference) {
    auto m = m0.clone(), s = s0.clone(), tl = torch::full({N}, -7.0f);
    auto g = buffer.clone();
    auto gl = g.narrow(1, 0, cols);
    auto lr = rows_of(l);
    if (reference) kc::reference::logsumexp_rows(lr, m.data_ptr<float>(), s.data_ptr<float>(), {t.data_ptr<int64_t>(), offset}, tl.data_ptr<float>());
    else kc::logsumexp_rows(lr, m.data_ptr<float>(), s.data_ptr<float>(), {t.data_ptr<int64_t>(), offset}, tl.data_ptr<float>());
    auto gr = rows_of(gl);
    if (reference) kc::reference::softmax_grad_rows(gr, lse.data_ptr<float>(), scale.data_ptr<float>(), {t.data_ptr<int64_t>(), offset});
    else kc::softmax_grad_rows(gr, lse.data_ptr<float>(), scale.data_ptr<float>(), {t.data_ptr<int64_t>(), offset});
    auto got_lse = m.to(torch::kDouble) + s.to(torch::kDouble).log();
    CHECK((got_lse - lse_ref).abs().max().item<double>() < 1e-5);
    // The target's logit where the target is in this chunk; untouched (-7) elsewhere.
    auto want_tl = torch::where(in, lf.gather(1, tc.clamp(0, cols - 1).unsqueeze(1)).squeeze(1), torch::full({N}, -7.0, torch::kDouble));
    CHECK((tl.to(torch::kDouble) - want_tl).abs().max().item<double>() < 1e-6);
    CHECK((gl.to(torch::kDouble) - grad_ref).abs().max().item<double>() < tol);
    // Columns past the row's end (up to the stride) are not written.
    CHECK(torch::equal(g.narrow(1, cols, ld - cols), buffer.narrow(1, cols, ld - cols)));

    // Kept-logits mode: the statistics again, the logits replaced by exponentials against
    // the chunk's row max, and the gradient from those by a multiply.
    auto m2 = m0.clone(), s2 = s0.clone(), tl2 = torch::full({N}, -7.0f), cmax = torch::empty({N});
    auto e = buffer.clone();
    auto el = e.narrow(1, 0, cols);
    auto er = rows_of(el);
    if (reference) kc::reference::logsumexp_rows(er, m2.data_ptr<float>(), s2.data_ptr<float>(), {t.data_ptr<int64_t>(), offset}, tl2.data_ptr<float>(), cmax.data_ptr<float>());
    else kc::logsumexp_rows(er, m2.data_ptr<float>(), s2.data_ptr<float>(), {t.data_ptr<int64_t>(), offset}, tl2.data_ptr<float>(), cmax.data_ptr<float>());
    CHECK(((m2.to(torch::kDouble) + s2.to(torch::kDouble).log()) - lse_ref).abs().max().item<double>() < 1e-5);
    CHECK((tl2.to(torch::kDouble) - want_tl).abs().max().item<double>() < 1e-6);
    CHECK(torch::equal(cmax, std::get<0>(l.to(torch::kFloat).max(1))));
    const double etol = dtype == torch::kFloat ? 1e-6 : 4e-3;  // bf16: the stored exponential's rounding (<= 1)
    CHECK((el.to(torch::kDouble) - (lf - cmax.to(torch::kDouble).unsqueeze(1)).exp()).abs().max().item<double>() < etol);
    if (reference) kc::reference::softmax_grad_rows_from_exp(er, cmax.data_ptr<float>(), lse.data_ptr<float>(), scale.data_ptr<float>(), {t.data_ptr<int64_t>(), offset});
    else kc::softmax_grad_rows_from_exp(er, cmax.data_ptr<float>(), lse.data_ptr<float>(), scale.data_ptr<float>(), {t.data_ptr<int64_t>(), offset});
    CHECK((el.to(torch::kDouble) - grad_ref).abs().max().item<double>() < tol);
    CHECK(torch::equal(e.narrow(1, cols, ld - cols), buffer.narrow(1, cols, ld - cols)));
  };
  SECTION("scalar reference") { run(true); }
  for (const auto& name : targets) {
    DYNAMIC_SECTION("target " << name) {
      ForcedTarget forced(name);
      CHECK(std::string(kc::lm_softmax_target()) == name);
      run(false);
    }
  }
}
