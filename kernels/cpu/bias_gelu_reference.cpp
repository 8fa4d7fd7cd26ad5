// The scalar reference of bias_gelu.h: plain C++ in double precision.
#include <cmath>
#include <vector>

#include "cpu/bias_gelu.h"

namespace prism::kernels::cpu::reference {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kKappa = 0.044715;

}  // namespace

void bias_gelu_forward(const Rows& x, const float* bias, const Rows& y) {
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c) {
      const double h = load(x, r, c) + (bias ? bias[c] : 0.0);
      store(y, r, c, 0.5 * h * (1.0 + std::tanh(kSqrt2OverPi * (h + kKappa * h * h * h))));
    }
}

void bias_gelu_backward(const Rows& dy, const Rows& x, const float* bias, const Rows& dx, float* dbias) {
  std::vector<double> sum(static_cast<size_t>(x.cols), 0.0);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c) {
      const double h = load(x, r, c) + (bias ? bias[c] : 0.0);
      const double t = std::tanh(kSqrt2OverPi * (h + kKappa * h * h * h));
      const double d = 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kKappa * h * h);
      const double g = load(dy, r, c) * d;
      sum[static_cast<size_t>(c)] += g;
      store(dx, r, c, g);
    }
  if (dbias)
    for (int64_t c = 0; c < x.cols; ++c) dbias[c] = static_cast<float>(sum[static_cast<size_t>(c)]);
}

}  // namespace prism::kernels::cpu::reference
