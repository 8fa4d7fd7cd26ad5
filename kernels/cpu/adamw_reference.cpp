// The scalar reference of adamw.h: the same fp32 formulas, one element at a time.
#include <cmath>

#include "cpu/adamw.h"
#include "cpu/bf16.h"

namespace prism::kernels::cpu::reference {

void adamw_step(const AdamWTensor& t, const AdamWHyper& h) {
  const float decay = static_cast<float>(h.lr * h.weight_decay);
  const float one_minus_b1 = static_cast<float>(1.0 - h.beta1), b2 = static_cast<float>(h.beta2);
  const float one_minus_b2 = static_cast<float>(1.0 - h.beta2);
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(h.beta1, static_cast<double>(h.step))));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(h.step))));
  const float eps = static_cast<float>(h.eps), scale = static_cast<float>(h.grad_scale);
  for (int64_t i = 0; i < t.n; ++i) {
    float g = t.grad_bf16 ? bf16_to_float(t.grad_bf16[i]) : t.grad_f32[i];
    if (scale != 1.0f) g /= scale;
    float p = t.param[i];
    p -= decay * p;
    float m = t.exp_avg[i];
    m += one_minus_b1 * (g - m);
    const float v = b2 * t.exp_avg_sq[i] + one_minus_b2 * g * g;
    p -= step_size * m / (std::sqrt(v) / bc2_sqrt + eps);
    t.param[i] = p;
    t.exp_avg[i] = m;
    t.exp_avg_sq[i] = v;
    if (t.copy_bf16) t.copy_bf16[i] = float_to_bf16(p);
  }
}

double sum_squares_bf16(const uint16_t* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = bf16_to_float(x[i]);
    s += v * v;
  }
  return s;
}

}  // namespace prism::kernels::cpu::reference
