// rope.h on Google Highway: compiled for every target of this architecture
// (foreach_target.h) and dispatched at run time to the best one the CPU supports
// (HWY_DYNAMIC_DISPATCH). A head's half-width is taken in whole vectors, then
// in 8- and 4-lane vectors (a 16-wide head has 8 pairs: under one AVX-512
// vector), then one pair at a time.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/rope_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "cpu/rope.h"

HWY_BEFORE_NAMESPACE();
namespace prism::kernels::cpu::rope_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fp32 lanes of tag D from fp32 or bf16 memory, and back (bf16: round to
// nearest even, a NaN staying a quiet NaN, as cpu/bf16.h does one value at a time).
template <class D>
HWY_INLINE hn::Vec<D> load_f(D d, const float* p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> load_f(D d, const uint16_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint16_t, D> d16;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}
template <class D>
HWY_INLINE void store_f(D d, float* p, hn::Vec<D> v) {
  hn::StoreU(v, d, p);
}
template <class D>
HWY_INLINE void store_f(D /* tag */, uint16_t* p, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> d16;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  auto r = hn::ShiftRight<16>(hn::Add(u, hn::Add(lsb, hn::Set(du, 0x7fffu))));
  r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u)), r);
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, r)), d16, p);  // r < 2^16: no saturation
}
inline float scalar_f(float x) { return x; }
inline float scalar_f(uint16_t h) { return bf16_to_float(h); }
inline void scalar_store(float* p, float v) { *p = v; }
inline void scalar_store(uint16_t* p, float v) { *p = float_to_bf16(v); }

// Pairs [c, half) of one head in vectors of tag D while they fill one; returns where it stopped.
template <class D, typename T>
HWY_INLINE int64_t rotate_span(D d, const T* x, T* y, const float* cs, const float* sn, int64_t c, int64_t half,
                               bool inverse) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (; c + N <= half; c += N) {
    const auto co = hn::LoadU(d, cs + c);
    auto si = hn::LoadU(d, sn + c);
    if (inverse) si = hn::Neg(si);
    const auto x1 = load_f(d, x + c), x2 = load_f(d, x + c + half);
    const auto y1 = hn::NegMulAdd(x2, si, hn::Mul(x1, co));  // x1 cos - x2 sin
    const auto y2 = hn::MulAdd(x1, si, hn::Mul(x2, co));     // x2 cos + x1 sin
    store_f(d, y + c, y1);
    store_f(d, y + c + half, y2);
  }
  return c;
}

template <typename T>
void rotate_head(const T* x, T* y, const float* cs, const float* sn, int64_t half, bool inverse) {
  int64_t c = rotate_span(hn::ScalableTag<float>(), x, y, cs, sn, 0, half, inverse);
  c = rotate_span(hn::CappedTag<float, 8>(), x, y, cs, sn, c, half, inverse);
  c = rotate_span(hn::CappedTag<float, 4>(), x, y, cs, sn, c, half, inverse);
  for (; c < half; ++c) {
    const float co = cs[c], si = inverse ? -sn[c] : sn[c];
    const float x1 = scalar_f(x[c]), x2 = scalar_f(x[c + half]);
    scalar_store(y + c, x1 * co - x2 * si);
    scalar_store(y + c + half, x2 * co + x1 * si);
  }
}

template <typename T>
void apply(const RopeParams& p) {
  const int64_t half = p.D / 2, rows = p.B * p.T;
#pragma omp parallel for schedule(static)
  for (int64_t u = 0; u < p.tensors * rows; ++u) {
    const int n = static_cast<int>(u / rows);
    const int64_t b = (u % rows) / p.T, t = u % p.T;
    const RopeView &xv = p.x[n], &yv = p.y[n];
    const T* x = static_cast<const T*>(xv.data) + b * xv.stride_b + t * xv.stride_t;
    T* y = static_cast<T*>(yv.data) + b * yv.stride_b + t * yv.stride_t;
    for (int64_t h = 0; h < p.H; ++h)
      rotate_head(x + h * xv.stride_h, y + h * yv.stride_h, p.cos + t * half, p.sin + t * half, half, p.inverse);
  }
}

void rope_apply(const RopeParams& p) {
  if (p.type == RowType::F32) apply<float>(p);
  else apply<uint16_t>(p);
}

const char* target_name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace prism::kernels::cpu::rope_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "cpu/simd_targets.h"
#include "hwy/targets.h"

namespace prism::kernels::cpu {
namespace rope_simd {
HWY_EXPORT(rope_apply);
HWY_EXPORT(target_name);
}  // namespace rope_simd

void rope_apply(const RopeParams& p) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(rope_simd::rope_apply)(p);
}
const char* rope_target() {
  apply_cpu_isa_to_dispatch();
  return HWY_DYNAMIC_DISPATCH(rope_simd::target_name)();
}

std::vector<std::string> rope_targets() { return runnable_target_names(HWY_TARGETS); }
void rope_force_target(const std::string& name) { force_dispatch_target(HWY_TARGETS, name); }

}  // namespace prism::kernels::cpu
#endif  // HWY_ONCE
