// The LM-head loss path per device (issue 20 item 4): plain linear +
// cross_entropy on CUDA, the chunked fused loss elsewhere. Both paths must be
// the same function: loss and gradients against each other and against
// LibTorch's own cross_entropy, in fp32 and under bf16 autocast. On a GPU the
// same comparison runs on CUDA tensors (skipped here without one).
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "prism/ops/lm_loss.h"
#include "prism/train/execution.h"

using namespace prism;
namespace F = torch::nn::functional;

namespace {

struct Result {
  double loss;
  torch::Tensor gx, gw;
};

Result run(LmLossPath path, const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& t, bool bf16) {
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  Execution e;
  e.device = x0.device();
  e.bf16 = bf16;
  torch::Tensor loss;
  {
    AutocastScope ac(e);
    loss = lm_head_loss(x, w, t, path);
  }
  CHECK(loss.scalar_type() == torch::kFloat);
  loss.backward();
  return {loss.item<double>(), x.grad(), w.grad()};
}

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  auto ad = a.to(torch::kCPU, torch::kDouble), bd = b.to(torch::kCPU, torch::kDouble);
  return ((ad - bd).norm() / bd.norm().clamp_min(1e-30)).item<double>();
}

// Both paths on one device: fp32 to rounding, bf16 autocast within bf16 precision of fp32.
void compare_paths(const torch::Device& dev) {
  torch::manual_seed(3);
  const int64_t N = 48, d = 40, V = 5003;  // V not a multiple of the chunk
  auto x = torch::randn({N, d}).to(dev), w = (torch::randn({V, d}) * 0.3).to(dev);
  auto t = torch::randint(0, V, {N}, torch::kLong).to(dev);
  t[2] = -1;  // ignored
  t[7] = -5;  // any negative target is ignored, not only -1
  // LibTorch's own, on the counted rows.
  auto keep = (t >= 0).nonzero().squeeze(1);
  auto xr = x.clone().requires_grad_(true), wr = w.clone().requires_grad_(true);
  auto ref = F::cross_entropy(F::linear(xr.index_select(0, keep), wr), t.index_select(0, keep));
  ref.backward();

  auto plain = run(LmLossPath::Plain, x, w, t, false), chunked = run(LmLossPath::Chunked, x, w, t, false);
  CHECK(plain.loss == Approx(ref.item<double>()).epsilon(1e-6));
  CHECK(chunked.loss == Approx(ref.item<double>()).epsilon(1e-6));
  CHECK(rel(plain.gx, xr.grad()) < 1e-5);
  CHECK(rel(plain.gw, wr.grad()) < 1e-5);
  CHECK(rel(chunked.gx, xr.grad()) < 1e-5);
  CHECK(rel(chunked.gw, wr.grad()) < 1e-5);

  auto plain16 = run(LmLossPath::Plain, x, w, t, true), chunked16 = run(LmLossPath::Chunked, x, w, t, true);
  for (const auto* r : {&plain16, &chunked16}) {
    CHECK(r->loss == Approx(ref.item<double>()).epsilon(2e-2));
    CHECK(rel(r->gx, xr.grad()) < 2e-2);
    CHECK(rel(r->gw, wr.grad()) < 2e-2);
    CHECK(r->gx.scalar_type() == torch::kFloat);
  }
  CHECK(rel(plain16.gx, xr.grad()) > 1e-5);  // the matmul really ran in bf16
}

}  // namespace

TEST_CASE("LM-head loss: the default path is plain on CUDA and chunked on the CPU", "[model][lm_loss]") {
  CHECK(lm_loss_path_for(torch::Device(torch::kCPU)) == LmLossPath::Chunked);
  CHECK(lm_loss_path_for(torch::Device(torch::kCUDA, 1)) == LmLossPath::Plain);
  CHECK(std::string(lm_loss_path_name(LmLossPath::Plain)) == "plain");
  CHECK(std::string(lm_loss_path_name(LmLossPath::Chunked)) == "chunked");
}

TEST_CASE("LM-head loss: plain and chunked paths compute the same loss and gradients (CPU)", "[model][lm_loss]") {
  compare_paths(torch::kCPU);
  // Every target ignored: 0 and zero gradients on both paths, not NaN.
  auto x = torch::randn({4, 8}), w = torch::randn({50, 8});
  auto none = torch::full({4}, -1, torch::kLong);
  for (auto path : {LmLossPath::Plain, LmLossPath::Chunked}) {
    auto r = run(path, x, w, none, false);
    CHECK(r.loss == 0.0);
    CHECK(r.gw.abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("LM-head loss: plain and chunked paths agree on a GPU", "[model][lm_loss][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device (the LM-head loss paths are compared on CUDA tensors there)");
    return;
  }
  compare_paths(torch::Device(torch::kCUDA, 0));
}
