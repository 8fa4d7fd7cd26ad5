// fp32 vectors loaded from and stored to fp32 or bf16 memory, for the Highway
// kernels that take either (lm_softmax_simd.cpp, bias_gelu_simd.cpp): bf16 is
// the top half of an fp32, so widening is a shift; narrowing rounds to the
// nearest even, a NaN staying a (quiet) NaN, as cpu/bf16.h does one value at a
// time (scalar_f / scalar_store, for the tails). Per-target include guard as
// Highway's -inl.h convention wants.
#if defined(PRISM_KERNELS_CPU_BF16_VEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PRISM_KERNELS_CPU_BF16_VEC_INL_H_
#undef PRISM_KERNELS_CPU_BF16_VEC_INL_H_
#else
#define PRISM_KERNELS_CPU_BF16_VEC_INL_H_
#endif

#include <cstdint>

#include "cpu/bf16.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace prism::kernels::cpu::bf16_vec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;
using VF = hn::Vec<DF>;

HWY_INLINE VF load_f(const float* p) { return hn::LoadU(DF(), p); }
HWY_INLINE VF load_f(const uint16_t* p) {
  return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(DU16(), p))));
}
HWY_INLINE void store_f(float* p, VF v) { hn::StoreU(v, DF(), p); }
HWY_INLINE void store_f(uint16_t* p, VF v) {
  const DU du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  auto r = hn::ShiftRight<16>(hn::Add(u, hn::Add(lsb, hn::Set(du, 0x7fffu))));
  r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u)), r);
  hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(DI(), r)), DU16(), p);  // r < 2^16: no saturation
}
inline float scalar_f(float x) { return x; }
inline float scalar_f(uint16_t h) { return bf16_to_float(h); }
inline void scalar_store(float* p, float v) { *p = v; }
inline void scalar_store(uint16_t* p, float v) { *p = float_to_bf16(v); }

}  // namespace HWY_NAMESPACE
}  // namespace prism::kernels::cpu::bf16_vec
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
