#pragma once
// adamw.h's update for one element, in fp32, and its constants: the scalar
// reference's loop body and the SIMD kernel's row tails (private to kernels/cpu).
#include <cmath>

#include "cpu/adamw.h"

namespace prism::kernels::cpu::adamw_scalar {

struct Consts {
  float decay, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps, scale;
  bool scaled;
};

inline Consts consts_of(const AdamWHyper& h) {
  Consts k;
  k.decay = static_cast<float>(h.lr * h.weight_decay);
  k.one_minus_b1 = static_cast<float>(1.0 - h.beta1);
  k.b2 = static_cast<float>(h.beta2);
  k.one_minus_b2 = static_cast<float>(1.0 - h.beta2);
  k.step_size = static_cast<float>(h.lr / (1.0 - std::pow(h.beta1, static_cast<double>(h.step))));
  k.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(h.step))));
  k.eps = static_cast<float>(h.eps);
  k.scaled = h.grad_scale != 1.0;
  k.scale = static_cast<float>(h.grad_scale);
  return k;
}

// One element: the weight p and the moments m, v in place, from the gradient g.
inline void update(float g, float& p, float& m, float& v, const Consts& k) {
  if (k.scaled) g /= k.scale;
  p -= k.decay * p;
  m += k.one_minus_b1 * (g - m);
  v = k.b2 * v + k.one_minus_b2 * g * g;
  p -= k.step_size * m / (std::sqrt(v) / k.bc2_sqrt + k.eps);
}

}  // namespace prism::kernels::cpu::adamw_scalar
