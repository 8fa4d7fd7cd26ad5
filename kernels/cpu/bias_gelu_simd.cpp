// bias_gelu.h on Google Highway: compiled for every target of this architecture
// (foreach_target.h) and dispatched at run time to the best one the CPU supports
// (HWY_DYNAMIC_DISPATCH). exp is Highway's (contrib/math, within a few ulp).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/bias_gelu_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "cpu/bf16_vec-inl.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/bias_gelu.h"

HWY_BEFORE_NAMESPACE();
namespace prism::kernels::cpu::gelu_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using namespace prism::kernels::cpu::bf16_vec::HWY_NAMESPACE;  // DF, VF, load_f, store_f, scalar_f, scalar_store

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kKappa = 0.044715f;
// Rows per block of the bias gradient's partial sums: the blocks, not the
// threads, fix the order of the sum.
constexpr int64_t kRowBlock = 32;

// The GELU and, for the backward, its derivative at h, through the logistic
// function: (1 + tanh(u)) / 2 = s = 1 / (1 + exp(-2u)), so gelu(h) = h s and
// gelu'(h) = s + 2 h s (1 - s) du/dh: one exp and one division, where tanh
// costs an expm1, a division and its range selects. exp's argument is capped at
// 80 (s then ~1e-35, so gelu(h) and gelu'(h) are ~0, as they should be, and
// exp stays finite).
HWY_INLINE VF logistic_2u(DF df, VF h, VF h2) {
  const VF minus_2u = hn::Mul(hn::Set(df, -2.0f * kSqrt2OverPi), hn::MulAdd(hn::Mul(hn::Set(df, kKappa), h), h2, h));
  const VF e = hn::Exp(df, hn::Min(minus_2u, hn::Set(df, 80.0f)));
  return hn::Div(hn::Set(df, 1.0f), hn::Add(hn::Set(df, 1.0f), e));
}
HWY_INLINE VF gelu(DF df, VF h) { return hn::Mul(h, logistic_2u(df, h, hn::Mul(h, h))); }
HWY_INLINE VF gelu_grad(DF df, VF h) {
  const VF one = hn::Set(df, 1.0f);
  const VF h2 = hn::Mul(h, h);
  const VF s = logistic_2u(df, h, h2);
  const VF du2 = hn::Mul(hn::Set(df, 2.0f * kSqrt2OverPi), hn::MulAdd(hn::Set(df, 3.0f * kKappa), h2, one));  // 2 du/dh
  return hn::MulAdd(hn::Mul(hn::Mul(h, s), hn::Sub(one, s)), du2, s);
}
// The same formulas for the row tails, so that every column of a row is
// computed one way.
inline float logistic_2u_scalar(float h) {
  const float minus_2u = -2.0f * kSqrt2OverPi * (kKappa * h * h * h + h);
  return 1.0f / (1.0f + std::exp(std::min(minus_2u, 80.0f)));
}
inline float gelu_scalar(float h) { return h * logistic_2u_scalar(h); }
inline float gelu_grad_scalar(float h) {
  const float s = logistic_2u_scalar(h);
  return h * s * (1.0f - s) * (2.0f * kSqrt2OverPi * (3.0f * kKappa * h * h + 1.0f)) + s;
}

template <typename T>
void forward_row(const T* x, const float* bias, T* y, int64_t n) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  int64_t c = 0;
  if (bias) {
    for (; c + L <= n; c += L) store_f(y + c, gelu(df, hn::Add(load_f(x + c), hn::LoadU(df, bias + c))));
    for (; c < n; ++c) scalar_store(y + c, gelu_scalar(scalar_f(x[c]) + bias[c]));
  } else {
    for (; c + L <= n; c += L) store_f(y + c, gelu(df, load_f(x + c)));
    for (; c < n; ++c) scalar_store(y + c, gelu_scalar(scalar_f(x[c])));
  }
}

// One row of the backward; the row's gradient is added into acc (fp32, one per column) when given.
template <typename T>
void backward_row(const T* dy, const T* x, const float* bias, T* dx, float* acc, int64_t n) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  int64_t c = 0;
  for (; c + L <= n; c += L) {
    VF h = load_f(x + c);
    if (bias) h = hn::Add(h, hn::LoadU(df, bias + c));
    const VF g = hn::Mul(load_f(dy + c), gelu_grad(df, h));
    if (acc) hn::StoreU(hn::Add(hn::LoadU(df, acc + c), g), df, acc + c);
    store_f(dx + c, g);
  }
  for (; c < n; ++c) {
    const float g = scalar_f(dy[c]) * gelu_grad_scalar(scalar_f(x[c]) + (bias ? bias[c] : 0.0f));
    if (acc) acc[c] += g;
    scalar_store(dx + c, g);
  }
}

template <typename T>
void forward_rows(const Rows& x, const float* bias, const Rows& y) {
  const T* xp = static_cast<const T*>(x.data);
  T* yp = static_cast<T*>(y.data);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < x.rows; ++r) forward_row(xp + r * x.ld, bias, yp + r * y.ld, x.cols);
}

template <typename T>
void backward_rows(const Rows& dy, const Rows& x, const float* bias, const Rows& dx, float* dbias) {
  const T* dyp = static_cast<const T*>(dy.data);
  const T* xp = static_cast<const T*>(x.data);
  T* dxp = static_cast<T*>(dx.data);
  const int64_t n = x.cols;
  // Each block of kRowBlock rows sums into its own partial row (none without a
  // bias gradient); the partials are then summed in block order, column by column.
  const int64_t blocks = (x.rows + kRowBlock - 1) / kRowBlock;
  std::vector<float> partial(dbias ? static_cast<size_t>(blocks * n) : 0, 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    float* acc = dbias ? partial.data() + b * n : nullptr;
    for (int64_t r = b * kRowBlock; r < std::min(x.rows, (b + 1) * kRowBlock); ++r)
      backward_row(dyp + r * dy.ld, xp + r * x.ld, bias, dxp + r * dx.ld, acc, n);
  }
  if (!dbias) return;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < n; ++c) {
    float s = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) s += partial[static_cast<size_t>(b * n + c)];
    dbias[c] = s;
  }
}

void bias_gelu_forward(const Rows& x, const float* bias, const Rows& y) {
  if (x.type == RowType::F32) forward_rows<float>(x, bias, y);
  else forward_rows<uint16_t>(x, bias, y);
}

void bias_gelu_backward(const Rows& dy, const Rows& x, const float* bias, const Rows& dx, float* dbias) {
  if (x.type == RowType::F32) backward_rows<float>(dy, x, bias, dx, dbias);
  else backward_rows<uint16_t>(dy, x, bias, dx, dbias);
}

const char* target_name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace prism::kernels::cpu::gelu_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "cpu/simd_targets.h"
#include "hwy/targets.h"

namespace prism::kernels::cpu {
namespace gelu_simd {
HWY_EXPORT(bias_gelu_forward);
HWY_EXPORT(bias_gelu_backward);
HWY_EXPORT(target_name);
}  // namespace gelu_simd

void bias_gelu_forward(const Rows& x, const float* bias, const Rows& y) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(gelu_simd::bias_gelu_forward)(x, bias, y);
}
void bias_gelu_backward(const Rows& dy, const Rows& x, const float* bias, const Rows& dx, float* dbias) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(gelu_simd::bias_gelu_backward)(dy, x, bias, dx, dbias);
}
const char* bias_gelu_target() {
  apply_cpu_isa_to_dispatch();
  return HWY_DYNAMIC_DISPATCH(gelu_simd::target_name)();
}

std::vector<std::string> bias_gelu_targets() { return runnable_target_names(HWY_TARGETS); }
void bias_gelu_force_target(const std::string& name) { force_dispatch_target(HWY_TARGETS, name); }

}  // namespace prism::kernels::cpu
#endif  // HWY_ONCE
