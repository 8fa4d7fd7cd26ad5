// The scalar reference of adamw.h: the fp32 update one element at a time
// (adamw_scalar.h), and the sum of squares in double.
#include "cpu/adamw.h"
#include "cpu/adamw_scalar.h"
#include "cpu/bf16.h"

namespace prism::kernels::cpu::reference {

namespace {
// Element i's extra value, or null.
const float* extra_at(const ExtraRows& e, int64_t i) {
  if (!e.rows) return nullptr;
  const float* row = e.rows[i / e.cols];
  return row ? row + i % e.cols : nullptr;
}
}  // namespace

void adamw_step(const AdamWTensor& t, const AdamWHyper& h) {
  const adamw_scalar::Consts k = adamw_scalar::consts_of(h);
  for (int64_t i = 0; i < t.n; ++i) {
    float g = t.grad_bf16 ? bf16_to_float(t.grad_bf16[i]) : t.grad_f32[i];
    if (const float* add = extra_at(t.extra, i)) g += *add;
    adamw_scalar::update(g, t.param[i], t.exp_avg[i], t.exp_avg_sq[i], k);
    if (t.copy_bf16) t.copy_bf16[i] = float_to_bf16(t.param[i]);
  }
}

double sum_squares_bf16(const uint16_t* x, int64_t n, const ExtraRows& extra) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float* add = extra_at(extra, i);
    const double v = bf16_to_float(x[i]) + (add ? *add : 0.0f);
    s += v * v;
  }
  return s;
}

}  // namespace prism::kernels::cpu::reference
