// The MLP's fused bias + GELU: the kernels (kernels/cpu/bias_gelu.h) on every
// Highway target this CPU runs against their scalar reference, and the autograd
// op (prism/ops/bias_gelu.h) against plain LibTorch math, gradients included.
#include <catch2/catch.hpp>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cstring>

#include "cpu/bias_gelu.h"
#include "prism/ops/bias_gelu.h"

namespace kc = prism::kernels::cpu;
namespace F = torch::nn::functional;

namespace {

kc::Rows rows_of(torch::Tensor& t) {
  return {t.data_ptr(), t.scalar_type() == torch::kFloat ? kc::RowType::F32 : kc::RowType::BF16, t.size(0), t.size(1),
          t.stride(0)};
}

struct ForcedTarget {
  explicit ForcedTarget(const std::string& name) { kc::bias_gelu_force_target(name); }
  ~ForcedTarget() { kc::bias_gelu_force_target(""); }
};

torch::Tensor gelu_ref(const torch::Tensor& h) { return F::gelu(h, F::GELUFuncOptions().approximate("tanh")); }

double max_err(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
}

// The largest error relative to max(1, |want|), element by element.
double max_rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  const auto w = want.to(torch::kDouble);
  return ((got.to(torch::kDouble) - w).abs() / w.abs().clamp_min(1.0)).max().item<double>();
}

}  // namespace

TEST_CASE("bias + GELU kernels: every SIMD target against the reference and LibTorch", "[model][gelu][kernels]") {
  const auto targets = kc::bias_gelu_targets();
  REQUIRE(!targets.empty());
  const auto dtype = GENERATE(torch::kFloat, torch::kBFloat16);
  // Row lengths that are and are not whole vectors; rows over several blocks of the bias sum
  // with a partial last one; a row stride past the row's end.
  const int64_t cols = GENERATE(1, 15, 16, 333, 3072);
  const bool with_bias = GENERATE(true, false);
  torch::manual_seed(cols + (with_bias ? 1 : 0));
  const int64_t N = 70, ld = cols + 3;
  auto xbuf = (torch::randn({N, ld}) * 3).to(dtype), dybuf = torch::randn({N, ld}).to(dtype);
  auto x = xbuf.narrow(1, 0, cols), dy = dybuf.narrow(1, 0, cols);
  auto bias = torch::randn({cols});
  // LibTorch math in double.
  auto h = x.to(torch::kDouble) + (with_bias ? bias.to(torch::kDouble) : torch::zeros({cols}, torch::kDouble));
  auto hg = h.clone().requires_grad_(true);
  auto y_ref = gelu_ref(hg);
  y_ref.backward(dy.to(torch::kDouble));
  auto dx_ref = hg.grad();
  auto dbias_ref = dx_ref.sum(0);
  const double tol = dtype == torch::kFloat ? 1e-5 : 1.0 / 128;  // relative (fp32: tanh and 1 - tanh^2 in float)
  const float* b = with_bias ? bias.data_ptr<float>() : nullptr;

  auto run = [&](bool reference) {
    auto ybuf = xbuf.clone();
    auto y = ybuf.narrow(1, 0, cols);
    auto xr = rows_of(x), yr = rows_of(y);
    if (reference) kc::reference::bias_gelu_forward(xr, b, yr);
    else kc::bias_gelu_forward(xr, b, yr);
    CHECK(max_rel_err(y, y_ref.detach()) < tol);
    CHECK(torch::equal(ybuf.narrow(1, cols, ld - cols), xbuf.narrow(1, cols, ld - cols)));  // past the row: untouched

    auto dxbuf = dybuf.clone();
    auto dx = dxbuf.narrow(1, 0, cols);
    auto dbias = torch::full({cols}, -7.0f);
    auto dyr = rows_of(dy), dxr = rows_of(dx);
    if (reference) kc::reference::bias_gelu_backward(dyr, xr, b, dxr, dbias.data_ptr<float>());
    else kc::bias_gelu_backward(dyr, xr, b, dxr, dbias.data_ptr<float>());
    CHECK(max_rel_err(dx, dx_ref) < tol);
    // The bias gradient is summed from the unrounded fp32 values.
    CHECK(max_err(dbias, dbias_ref) < 1e-4 * std::max(1.0, dbias_ref.abs().max().item<double>()));
    CHECK(torch::equal(dxbuf.narrow(1, cols, ld - cols), dybuf.narrow(1, cols, ld - cols)));

    // Without a bias gradient, and in place (dx over dy, y over x): the same values.
    auto dy_in_place = dy.clone();
    auto dipr = rows_of(dy_in_place);
    if (reference) kc::reference::bias_gelu_backward(dipr, xr, b, dipr, nullptr);
    else kc::bias_gelu_backward(dipr, xr, b, dipr, nullptr);
    CHECK(torch::equal(dy_in_place, dx));
    auto x_in_place = x.clone();
    auto xipr = rows_of(x_in_place);
    if (reference) kc::reference::bias_gelu_forward(xipr, b, xipr);
    else kc::bias_gelu_forward(xipr, b, xipr);
    CHECK(torch::equal(x_in_place, y));
  };
  SECTION("scalar reference") { run(true); }
  for (const auto& name : targets) {
    DYNAMIC_SECTION("target " << name) {
      ForcedTarget forced(name);
      CHECK(std::string(kc::bias_gelu_target()) == name);
      run(false);
    }
  }
}

TEST_CASE("bias + GELU kernel: the bias gradient is the same bits on any thread count", "[model][gelu][kernels]") {
  torch::manual_seed(3);
  const int64_t N = 1000, C = 512;  // 32 blocks of rows
  auto x = torch::randn({N, C}), dy = torch::randn({N, C}), bias = torch::randn({C});
  auto run = [&](int threads) {
    const int before = torch::get_num_threads();
    torch::set_num_threads(threads);
    auto dx = torch::empty_like(x), dbias = torch::empty({C});
    auto xr = rows_of(x), dyr = rows_of(dy), dxr = rows_of(dx);
    kc::bias_gelu_backward(dyr, xr, bias.data_ptr<float>(), dxr, dbias.data_ptr<float>());
    torch::set_num_threads(before);
    return dbias;
  };
  auto one = run(1), two = run(2), three = run(3);
  CHECK(std::memcmp(one.data_ptr(), two.data_ptr(), C * sizeof(float)) == 0);
  CHECK(std::memcmp(one.data_ptr(), three.data_ptr(), C * sizeof(float)) == 0);
}

TEST_CASE("linear + GELU: the fused op against torch::linear and GELU, gradients included", "[model][gelu]") {
  torch::manual_seed(11);
  const int64_t B = 3, T = 21, Cin = 48, Cout = 4 * 48;
  auto x0 = torch::randn({B, T, Cin}), w0 = torch::randn({Cout, Cin}) * 0.2, b0 = torch::randn({Cout}) * 0.5;
  auto g = torch::randn({B, T, Cout});
  const bool with_bias = GENERATE(true, false);
  const bool bf16 = GENERATE(false, true);
  auto grads = [&](bool fused) {
    auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    auto b = with_bias ? b0.clone().requires_grad_(true) : torch::Tensor();
    torch::Tensor y;
    {
      at::autocast::set_autocast_enabled(torch::kCPU, bf16);
      at::autocast::set_autocast_dtype(torch::kCPU, torch::kBFloat16);
      y = fused ? prism::linear_gelu(x, w, b) : gelu_ref(torch::linear(x, w, b));
      at::autocast::set_autocast_enabled(torch::kCPU, false);
      at::autocast::clear_cache();
    }
    CHECK(y.scalar_type() == (bf16 ? torch::kBFloat16 : torch::kFloat));
    (y.to(torch::kFloat) * g).sum().backward();
    std::vector<torch::Tensor> out{y.detach().to(torch::kFloat), x.grad(), w.grad()};
    if (with_bias) {
      CHECK(b.grad().scalar_type() == torch::kFloat);
      out.push_back(b.grad());
    }
    return out;
  };
  const auto fused = grads(true), plain = grads(false);
  REQUIRE(fused.size() == plain.size());
  // fp32: rounding of the same math; bf16: LibTorch rounds the bias to bf16 and adds it in
  // bf16 where the kernel adds the fp32 bias, and sums the bias gradient from rounded values.
  const double rel = bf16 ? 3e-2 : 2e-5;
  for (size_t i = 0; i < fused.size(); ++i) {
    const double scale = std::max(1.0, plain[i].abs().max().item<double>());
    INFO("output " << i << " (y, dx, dW, db)");
    CHECK(max_err(fused[i], plain[i]) < rel * scale);
  }
}

TEST_CASE("linear + GELU: fp64 falls back to LibTorch math, and the shapes the fused op takes", "[model][gelu]") {
  torch::manual_seed(5);
  auto x = torch::randn({4, 8}, torch::kDouble), w = torch::randn({16, 8}, torch::kDouble),
       b = torch::randn({16}, torch::kDouble);
  CHECK_FALSE(prism::fused_bias_gelu_fits(torch::linear(x, w), b));
  CHECK(torch::allclose(prism::linear_gelu(x, w, b), gelu_ref(torch::linear(x, w, b)), 1e-12, 1e-12));
  CHECK(prism::fused_bias_gelu_fits(torch::randn({4, 16}), torch::randn({16})));
  CHECK_FALSE(prism::fused_bias_gelu_fits(torch::randn({4, 16}), torch::randn({15})));
  CHECK(std::string(prism::bias_gelu_cpu_target()) == kc::bias_gelu_targets().front());
}
