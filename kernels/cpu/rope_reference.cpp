// The scalar reference of rope.h: plain C++ in double precision, one element
// at a time.
#include "cpu/rope.h"

namespace prism::kernels::cpu::reference {
namespace {

double load_at(RowType type, const void* base, int64_t i) {
  if (type == RowType::F32) return static_cast<const float*>(base)[i];
  return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
}

void store_at(RowType type, void* base, int64_t i, double v) {
  const float f = static_cast<float>(v);
  if (type == RowType::F32) static_cast<float*>(base)[i] = f;
  else static_cast<uint16_t*>(base)[i] = float_to_bf16(f);
}

}  // namespace

void rope_apply(const RopeParams& p) {
  const int64_t half = p.D / 2;
  const double sign = p.inverse ? -1.0 : 1.0;
  for (int n = 0; n < p.tensors; ++n) {
    const RopeView &x = p.x[n], &y = p.y[n];
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t t = 0; t < p.T; ++t)
        for (int64_t h = 0; h < p.H; ++h) {
          const int64_t xo = b * x.stride_b + t * x.stride_t + h * x.stride_h;
          const int64_t yo = b * y.stride_b + t * y.stride_t + h * y.stride_h;
          for (int64_t c = 0; c < half; ++c) {
            const double cs = p.cos[t * half + c], sn = sign * p.sin[t * half + c];
            const double x1 = load_at(p.type, x.data, xo + c), x2 = load_at(p.type, x.data, xo + c + half);
            store_at(p.type, y.data, yo + c, x1 * cs - x2 * sn);
            store_at(p.type, y.data, yo + c + half, x2 * cs + x1 * sn);
          }
        }
  }
}

}  // namespace prism::kernels::cpu::reference
