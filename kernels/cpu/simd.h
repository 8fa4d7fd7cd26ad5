#pragma once
// A 16-lane fp32 vector for the attention kernel, in two spellings: AVX-512
// intrinsics when the translation unit is compiled for AVX-512, plain arrays
// otherwise (the portable fallback). Each ISA's translation unit includes this
// inside its own namespace (PRISM_ISA_NS), so the two never share a symbol.
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
// GCC 12's intrinsics headers trip -Wmaybe-uninitialized on their own
// _mm*_undefined_* helpers (GCC bug 105593); the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#ifndef PRISM_ISA_NS
#error "define PRISM_ISA_NS before including kernels/cpu/simd.h"
#endif

namespace prism::kernels::cpu::PRISM_ISA_NS {
namespace {

constexpr int kLanes = 16;

// bf16 <-> fp32 for single values: bf16 is the top half of an fp32; rounding is
// to nearest even, NaN stays NaN.
inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

#if defined(__AVX512F__)

struct Vec {
  __m512 v;
};
using Mask = __mmask16;

// Lanes [0, n) on; n may be <= 0 (none) or >= 16 (all).
inline Mask tail_mask(int64_t n) { return n >= kLanes ? Mask(0xffff) : n <= 0 ? Mask(0) : Mask((1u << n) - 1u); }
inline Vec vzero() { return {_mm512_setzero_ps()}; }
inline Vec vset(float x) { return {_mm512_set1_ps(x)}; }
inline Vec viota(float start) {
  return {_mm512_add_ps(_mm512_set1_ps(start),
                        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))};
}
inline Vec vload(const float* p) { return {_mm512_loadu_ps(p)}; }
inline Vec vload(const float* p, Mask m) { return {_mm512_maskz_loadu_ps(m, p)}; }
inline void vstore(float* p, Vec a) { _mm512_storeu_ps(p, a.v); }
inline void vstore(float* p, Vec a, Mask m) { _mm512_mask_storeu_ps(p, m, a.v); }
inline Vec vload_bf16(const uint16_t* p, Mask m) {
  __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline void vstore_bf16(uint16_t* p, Vec a, Mask m) {
#if defined(__AVX512BF16__)
  __m256i h = (__m256i)_mm512_cvtneps_pbh(a.v);
#else
  // Round to nearest even by integer arithmetic; quiet any NaN.
  __m512i u = _mm512_castps_si512(a.v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  __m256i h = _mm512_cvtepi32_epi16(r);
#endif
  _mm256_mask_storeu_epi16(p, m, h);
}
inline Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline Vec vfmadd(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec vmax(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
inline Vec vdiv(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
// Lanes where idx lies outside [lo, hi] get `fill`.
inline Vec vkeep_between(Vec a, Vec idx, float lo, float hi, float fill) {
  __mmask16 out = _mm512_cmp_ps_mask(idx.v, _mm512_set1_ps(lo), _CMP_LT_OQ) |
                  _mm512_cmp_ps_mask(idx.v, _mm512_set1_ps(hi), _CMP_GT_OQ);
  return {_mm512_mask_mov_ps(a.v, out, _mm512_set1_ps(fill))};
}
inline float vsum(Vec a) { return _mm512_reduce_add_ps(a.v); }

// 2^x, relative error ~1e-7; exactly 0 for x <= -160 (and for -inf).
inline Vec vexp2(Vec x) {
  __m512 xc = _mm512_max_ps(x.v, _mm512_set1_ps(-160.0f));
  xc = _mm512_min_ps(xc, _mm512_set1_ps(128.0f));
  __m512 n = _mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(xc, n);  // [-0.5, 0.5]
  // Taylor series of e^(f ln 2) to degree 7: truncation error < 6e-9 on [-0.5, 0.5].
  __m512 p = _mm512_set1_ps(1.5252734e-05f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530e-04f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-02f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return {_mm512_scalef_ps(p, n)};
}

#else  // portable fallback

struct Vec {
  float v[kLanes];
};
struct Mask {
  int n;
};

inline Mask tail_mask(int64_t n) { return {n >= kLanes ? kLanes : n <= 0 ? 0 : static_cast<int>(n)}; }
inline Vec vset(float x) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = x;
  return r;
}
inline Vec vzero() { return vset(0.0f); }
inline Vec viota(float start) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = start + static_cast<float>(i);
  return r;
}
inline Vec vload(const float* p) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = p[i];
  return r;
}
inline Vec vload(const float* p, Mask m) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = i < m.n ? p[i] : 0.0f;
  return r;
}
inline void vstore(float* p, Vec a) {
  for (int i = 0; i < kLanes; ++i) p[i] = a.v[i];
}
inline void vstore(float* p, Vec a, Mask m) {
  for (int i = 0; i < m.n; ++i) p[i] = a.v[i];
}
inline Vec vload_bf16(const uint16_t* p, Mask m) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = i < m.n ? bf16_to_float(p[i]) : 0.0f;
  return r;
}
inline void vstore_bf16(uint16_t* p, Vec a, Mask m) {
  for (int i = 0; i < m.n; ++i) p[i] = float_to_bf16(a.v[i]);
}
#define PRISM_VEC_BINOP(op)                                   \
  inline Vec operator op(Vec a, Vec b) {                      \
    Vec r;                                                    \
    for (int i = 0; i < kLanes; ++i) r.v[i] = a.v[i] op b.v[i]; \
    return r;                                                 \
  }
PRISM_VEC_BINOP(+)
PRISM_VEC_BINOP(-)
PRISM_VEC_BINOP(*)
#undef PRISM_VEC_BINOP
// a * b + c with two roundings: std::fma is a libm call on CPUs without FMA.
inline Vec vfmadd(Vec a, Vec b, Vec c) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i];
  return r;
}
inline Vec vmax(Vec a, Vec b) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
  return r;
}
inline Vec vdiv(Vec a, Vec b) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = a.v[i] / b.v[i];
  return r;
}
inline Vec vkeep_between(Vec a, Vec idx, float lo, float hi, float fill) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = (idx.v[i] < lo || idx.v[i] > hi) ? fill : a.v[i];
  return r;
}
inline float vsum(Vec a) {
  float s = 0.0f;
  for (int i = 0; i < kLanes; ++i) s += a.v[i];
  return s;
}
inline Vec vexp2(Vec x) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = x.v[i] <= -160.0f ? 0.0f : std::exp2(x.v[i]);
  return r;
}

#endif

}  // namespace
}  // namespace prism::kernels::cpu::PRISM_ISA_NS
