// The fused causal attention algorithm, written once on Google Highway and
// compiled per instruction set: attention_simd.cpp includes it for every
// Highway target (foreach_target.h), attention_simd_bf16.cpp once more for the
// AVX-512 target with AVX512-BF16 pair dot products (PRISM_BF16_DOT).
//
// Tiles are stored transposed: a score tile holds keys in rows and queries in
// the vector lanes, so the online softmax (row max, rescale, row sums, the
// distance accumulator sum_j p_ij (i - j)) is purely lane-wise with no
// horizontal reductions, and every matrix product is one register-tiled
// kernel C (+)= A B with A read through arbitrary strides (tile_products-inl.h).
//
// The includer defines PRISM_KERNEL_NS (the enclosing namespace) and, for the
// AVX512-BF16 build, PRISM_BF16_DOT=1. Per-target include guard as Highway's
// -inl.h convention wants.
#if defined(PRISM_KERNELS_CPU_ATTENTION_KERNEL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PRISM_KERNELS_CPU_ATTENTION_KERNEL_INL_H_
#undef PRISM_KERNELS_CPU_ATTENTION_KERNEL_INL_H_
#else
#define PRISM_KERNELS_CPU_ATTENTION_KERNEL_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu/attention_cpu.h"
#include "cpu/bf16.h"
#include "cpu/workspace.h"
#include "hwy/highway.h"

#ifndef PRISM_KERNEL_NS
#error "define PRISM_KERNEL_NS before including cpu/attention_kernel-inl.h"
#endif
#ifndef PRISM_BF16_DOT
#define PRISM_BF16_DOT 0
#endif
#ifndef PRISM_AMX
#define PRISM_AMX 0
#endif

// The AVX512-BF16 build compiles the AVX-512 target only; the pair products
// need the vdpbf16ps instructions on top of Highway's AVX-512 flags (GCC adds
// target pragmas to the enclosing ones).
#if PRISM_BF16_DOT && HWY_TARGET == HWY_AVX3 && HWY_COMPILER_GCC_ACTUAL
#define PRISM_PAIRS 1
#else
#define PRISM_PAIRS 0
#endif
#if !PRISM_BF16_DOT || PRISM_PAIRS

HWY_BEFORE_NAMESPACE();
#if PRISM_PAIRS
#pragma GCC target("avx512bf16")
#endif
#if PRISM_PAIRS && PRISM_AMX
#pragma GCC target("amx-tile,amx-bf16")
#endif
namespace PRISM_KERNEL_NS {
namespace HWY_NAMESPACE {
namespace {

#include "cpu/tile_products-inl.h"

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.69314718055994531f;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t BQ = kBlockQ, BK = kBlockK;
static_assert(BQ == BK, "causal tile skipping assumes square tiles: key block kb ends at query block kb");
static_assert(BQ % (16 * 4) == 0, "a query block is whole register tiles of up to 4 x 16 lanes wide");

// Whether bf16 inputs multiply as bf16 pairs (AVX512-BF16) on this build.
template <typename In>
constexpr bool use_pairs() {
  return PRISM_PAIRS && sizeof(In) == 2;
}

inline int64_t lanes() { return static_cast<int64_t>(hn::Lanes(DF())); }

// ------------------------------------------------------------ vector helpers

// bf16 is the top half of an fp32: widen by a shift; narrow rounding to
// nearest even, NaN stays NaN.
inline float to_float(float x) { return x; }
inline float to_float(uint16_t h) { return bf16_to_float(h); }
HWY_INLINE VF widen_bf16(hn::Vec<DU16> h) { return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(DU(), h))); }
HWY_INLINE hn::Vec<DU16> narrow_bf16(VF v) {
#if PRISM_PAIRS
  return hn::Vec<DU16>{(__m256i)_mm512_cvtneps_pbh(v.raw)};
#else
  const DU du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  auto r = hn::ShiftRight<16>(hn::Add(u, hn::Add(lsb, hn::Set(du, 0x7fffu))));
  const auto quiet = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
  r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, r);
  return hn::DemoteTo(DU16(), hn::BitCast(DI(), r));
#endif
}

// n elements from p (all lanes when n >= lanes), zeros after; never reads
// past p + n, so rows of the caller's tensors are safe to read to their end.
HWY_INLINE VF load_part(const float* p, int64_t n) {
  const DF df;
  if (n >= lanes()) return hn::LoadU(df, p);
  alignas(64) float buf[16] = {};
  if (n > 0) std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
  return hn::LoadU(df, buf);
}
HWY_INLINE VF load_part(const uint16_t* p, int64_t n) {
  if (n >= lanes()) return widen_bf16(hn::LoadU(DU16(), p));
  alignas(64) uint16_t buf[16] = {};
  if (n > 0) std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
  return widen_bf16(hn::LoadU(DU16(), buf));
}
// Writes the first min(n, lanes) elements of v to p, nothing past them.
HWY_INLINE void store_part(float* p, VF v, int64_t n) {
  const DF df;
  if (n >= lanes()) return hn::StoreU(v, df, p);
  alignas(64) float buf[16];
  hn::StoreU(v, df, buf);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}
HWY_INLINE void store_part(uint16_t* p, VF v, int64_t n) {
  const DU16 d16;
  if (n >= lanes()) return hn::StoreU(narrow_bf16(v), d16, p);
  alignas(64) uint16_t buf[16];
  hn::StoreU(narrow_bf16(v), d16, buf);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(uint16_t));
}

// 2^x, relative error ~1e-7; exactly 0 for x <= -127 (and for -inf).
HWY_INLINE VF exp2v(VF x) {
  const DF df;
  const DI di;
  const VF xc = hn::Min(hn::Max(x, hn::Set(df, -127.0f)), hn::Set(df, 127.0f));
  const VF n = hn::Round(xc);
  const VF f = hn::Sub(xc, n);  // [-0.5, 0.5]
  // Taylor series of e^(f ln 2) to degree 7: truncation error < 6e-9 on [-0.5, 0.5].
  VF p = hn::Set(df, 1.5252734e-05f);
  p = hn::MulAdd(p, f, hn::Set(df, 1.5403530e-04f));
  p = hn::MulAdd(p, f, hn::Set(df, 1.3333558e-03f));
  p = hn::MulAdd(p, f, hn::Set(df, 9.6181291e-03f));
  p = hn::MulAdd(p, f, hn::Set(df, 5.5504109e-02f));
  p = hn::MulAdd(p, f, hn::Set(df, 2.4022651e-01f));
  p = hn::MulAdd(p, f, hn::Set(df, 6.9314718e-01f));
  p = hn::MulAdd(p, f, hn::Set(df, 1.0f));
  // 2^n from its exponent bits; n = -127 gives +0.
  const VF scale = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
  return hn::Mul(p, scale);
}

// Lanes whose index lies outside [lo, hi] become `fill`.
HWY_INLINE VF keep_between(VF a, VF idx, float lo, float hi, float fill) {
  const DF df;
  const auto out = hn::Or(hn::Lt(idx, hn::Set(df, lo)), hn::Gt(idx, hn::Set(df, hi)));
  return hn::IfThenElse(out, hn::Set(df, fill), a);
}

// dst[0:n] = src[0:n] * scale in the output type; src is a padded workspace row.
template <typename Out>
HWY_INLINE void store_row(const float* src, Out* dst, int64_t n, float scale) {
  const DF df;
  const VF s = hn::Set(df, scale);
  for (int64_t i = 0; i < n; i += lanes()) store_part(dst + i, hn::Mul(hn::LoadU(df, src + i), s), n - i);
}
// Zeros a padded workspace row (or a row of the caller's fp32 dq when n is a
// multiple of 16).
HWY_INLINE void zero_row(float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += lanes()) hn::StoreU(hn::Zero(DF()), DF(), dst + i);
}

// Runs body(item, thread) for item in [0, n) on up to `threads` OpenMP threads,
// handing out items one at a time (their costs differ under the causal mask).
template <typename Body>
void parallel_items(int64_t n, int threads, const Body& body) {
#ifdef _OPENMP
  if (threads > 1 && n > 1) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t it = 0; it < n; ++it) body(it, omp_get_thread_num());
    return;
  }
#endif
  for (int64_t it = 0; it < n; ++it) body(it, 0);
}

// Rows t = 0..T-1 of one (b, h) slice: row t starts at base + t ld.
struct Rows {
  const float* base;
  int64_t ld;
  const float* row(int64_t t) const { return base + t * ld; }
};
struct MutRows {
  float* base;
  int64_t ld;
  float* row(int64_t t) const { return base + t * ld; }
};

template <typename In>
const In* slice(const void* base, const Strides& s, int64_t b, int64_t h) {
  return static_cast<const In*>(base) + b * s.batch + h * s.head;
}
template <typename In>
In* slice(void* base, const Strides& s, int64_t b, int64_t h) {
  return static_cast<In*>(base) + b * s.batch + h * s.head;
}

// Rows [t0, t0 + n) of a (b, h) slice, converted to fp32 into a dense tile
// with row stride pad16(D), zero-padded. The copy is cheap next to the
// products that reuse it, and the input's own row stride (3 d_model floats for
// a fused qkv projection, a multiple of 1 KiB) would map a tile's rows onto a
// few L1 sets and evict itself.
template <typename In>
Rows dense_rows(const In* x, int64_t ld, int64_t t0, int64_t n, int64_t D, float* buf) {
  const int64_t dp = pad16(D);
  for (int64_t t = 0; t < n; ++t) {
    const In* src = x + (t0 + t) * ld;
    for (int64_t d = 0; d < dp; d += lanes()) hn::StoreU(load_part(src + d, D - d), DF(), buf + t * dp + d);
  }
  return {buf, dp};
}

// Rows [t0, t0 + n) of a (b, h) slice transposed into a D x BQ tile and
// scaled, columns past n zero: the B operand of the score products.
template <typename In>
void transposed_tile(const In* x, int64_t ld, int64_t t0, int64_t n, int64_t D, float scale, float* out) {
  for (int64_t i = 0; i < BQ; ++i) {
    if (i < n) {
      const In* r = x + (t0 + i) * ld;
      for (int64_t d = 0; d < D; ++d) out[d * BQ + i] = to_float(r[d]) * scale;
    } else {
      for (int64_t d = 0; d < D; ++d) out[d * BQ + i] = 0.0f;
    }
  }
}

#if PRISM_PAIRS
// Pair-packs rows [t0, t0 + n) of a bf16 slice along D, transposed, for the
// score products' B: pair p of column i at out[(p BQ + i) 2]; columns past n
// and a last odd element's partner are zero.
inline void pair_pack(const uint16_t* x, int64_t ld, int64_t t0, int64_t n, int64_t D, uint16_t* out) {
  const int64_t pairs = (D + 1) / 2;
  for (int64_t i = 0; i < BQ; ++i) {
    const uint16_t* r = i < n ? x + (t0 + i) * ld : nullptr;
    for (int64_t p = 0; p < pairs; ++p) {
      uint16_t* o = out + (p * BQ + i) * 2;
      o[0] = r ? r[2 * p] : 0;
      o[1] = r && 2 * p + 1 < D ? r[2 * p + 1] : 0;
    }
  }
}

// Dense bf16 copy of rows [t0, t0 + n), row stride pad16(D), zero-padded.
inline void dense_rows_bf16(const uint16_t* x, int64_t ld, int64_t t0, int64_t n, int64_t D, uint16_t* buf) {
  const int64_t dp = pad16(D);
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(buf + t * dp, x + (t0 + t) * ld, static_cast<size_t>(D) * 2);
    for (int64_t d = D; d < dp; ++d) buf[t * dp + d] = 0;
  }
}
#else
// Never called without the pair products (use_pairs() is false).
inline void pair_gemm(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, float*,
                      int64_t, bool, const float*) {}
inline void store_pairs(uint16_t*, VF, VF) {}
inline void pair_pack_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, uint16_t*, int64_t) {}
inline void pair_pack(const uint16_t*, int64_t, int64_t, int64_t, int64_t, uint16_t*) {}
inline void dense_rows_bf16(const uint16_t*, int64_t, int64_t, int64_t, int64_t, uint16_t*) {}
#endif

// ---------------------------------------------------------------- forward

template <typename In>
struct Forward {
  const AttentionForwardParams& p;
  ForwardLayout lay;
  float* ws;
  int64_t B, H, T, nqb;
};

// The online softmax of one score tile (keys in rows, the queries of one
// vector in the lanes from iv): running max m, sum l, distance accumulator
// sum p (i - j), and alpha = exp2(m_old - m_new) for rescaling the output.
// Scores s (already in log2 units unless `ss` rescales them) become
// probabilities in place, or bf16 pairs in p_pairs on the pair path.
template <bool kPairs>
HWY_INLINE void softmax_lanes(float* s, int64_t mkg, int64_t q0, int64_t iv, int64_t k0, bool diag, float ss_scale,
                              bool want_dist, float* m, float* l, float* dacc, float* alpha, uint16_t* p_pairs) {
  const DF df;
  const VF ss = hn::Set(df, ss_scale);
  const VF qi = hn::Iota(df, static_cast<float>(q0 + iv));
  const VF m_old = hn::LoadU(df, m + iv);
  VF mx = m_old;
  if (diag || kPairs) {
    for (int64_t j = 0; j < mkg; ++j) {
      VF x = hn::Mul(hn::LoadU(df, s + j * BQ), ss);
      if (diag) x = keep_between(x, qi, static_cast<float>(k0 + j), kInf, -kInf);
      hn::StoreU(x, df, s + j * BQ);
      mx = hn::Max(mx, x);
    }
  } else {
    for (int64_t j = 0; j < mkg; ++j) mx = hn::Max(mx, hn::LoadU(df, s + j * BQ));
  }
  const VF al = exp2v(hn::Sub(m_old, mx));
  VF ls = hn::Zero(df), ds = hn::Zero(df);
  // Two key rows at a time: the pair path stores them as bf16 pairs for P V.
  for (int64_t j = 0; j < mkg; j += 2) {
    const bool two = j + 1 < mkg;
    const VF p0 = exp2v(hn::Sub(hn::LoadU(df, s + j * BQ), mx));
    const VF p1 = two ? exp2v(hn::Sub(hn::LoadU(df, s + (j + 1) * BQ), mx)) : hn::Zero(df);
    ls = hn::Add(ls, hn::Add(p0, p1));
    // sum_j p_ij (i - j) accumulated as it is: i - sum_j p_ij j / l would
    // cancel catastrophically for a local head at large i. Masked keys have p = 0.
    if (want_dist) {
      const VF d0 = hn::Sub(qi, hn::Set(df, static_cast<float>(k0 + j)));
      ds = hn::MulAdd(p0, d0, hn::MulAdd(p1, hn::Sub(d0, hn::Set(df, 1.0f)), ds));
    }
    if constexpr (kPairs) {
      store_pairs(p_pairs + ((j / 2) * BQ + iv) * 2, p0, p1);
    } else {
      hn::StoreU(p0, df, s + j * BQ);
      if (two) hn::StoreU(p1, df, s + (j + 1) * BQ);
    }
  }
  if (want_dist) hn::StoreU(hn::MulAdd(hn::LoadU(df, dacc + iv), al, ds), df, dacc + iv);
  hn::StoreU(mx, df, m + iv);
  hn::StoreU(hn::MulAdd(hn::LoadU(df, l + iv), al, ls), df, l + iv);
  hn::StoreU(al, df, alpha + iv);
}

// Query blocks [qb0, qb1) of one (b, h): each k and v tile is laid out once
// and used by every block of the group (re-reading k and v from memory once
// per query block costs more than the products at large head dims).
template <typename In, int kD>
void forward_item(const Forward<In>& f, int64_t b, int64_t h, int64_t qb0, int64_t qb1, float* thread_ws) {
  const auto& p = f.p;
  const int64_t D = kD > 0 ? kD : p.head_dim, Dp = pad16(D), T = f.T;
  float* st = thread_ws + f.lay.score_tile;  // BK x BQ: scores, then probabilities
  float* kbuf = thread_ws + f.lay.kv_tiles;  // BK x Dp each: dense fp32 k and v tiles
  float* vbuf = kbuf + BK * Dp;
  // Pair path: probabilities as bf16 pairs of key rows, (BK / 2) x BQ pairs.
  auto* p_pairs = reinterpret_cast<uint16_t*>(thread_ws + f.lay.p_pairs);
  const bool want_dist = p.distance != nullptr;
  // Per query block g of the group:
  auto qt_of = [&](int64_t g) { return thread_ws + f.lay.q_tile + g * f.lay.q_tile_size; };  // D x BQ, transposed
  auto acc_of = [&](int64_t g) { return thread_ws + f.lay.out_acc + g * BQ * Dp; };         // BQ x Dp, unnormalised
  auto stats_of = [&](int64_t g) { return thread_ws + f.lay.row_stats + g * 4 * BQ; };      // m, l, dacc, alpha

  const In* q = slice<In>(p.q, p.q_stride, b, h);
  const float c = p.scale * kLog2e;
  constexpr bool pairs = use_pairs<In>();
  // Scores come out in log2 units: the scale is folded into the fp32 q tile,
  // or applied to the scores when they are bf16 pair dot products.
  const float score_scale = pairs ? c : 1.0f;
  for (int64_t qb = qb0; qb < qb1; ++qb) {
    const int64_t q0 = qb * BQ, mq = imin(BQ, T - q0);
    float* qt = qt_of(qb - qb0);
    if constexpr (pairs)
      pair_pack(reinterpret_cast<const uint16_t*>(q), p.q_stride.seq, q0, mq, D, reinterpret_cast<uint16_t*>(qt));
    else
      transposed_tile(q, p.q_stride.seq, q0, mq, D, c, qt);
    float* m = stats_of(qb - qb0);
    for (int64_t i = 0; i < BQ; i += lanes()) {
      hn::StoreU(hn::Set(DF(), -kInf), DF(), m + i);  // running max (log2 units)
      hn::StoreU(hn::Zero(DF()), DF(), m + BQ + i);      // running sum of exp2(s - m)
      hn::StoreU(hn::Zero(DF()), DF(), m + 2 * BQ + i);  // running sum of exp2(s - m) (i - j)
    }
  }

  const In* k_in = slice<In>(p.k, p.k_stride, b, h);
  const In* v_in = slice<In>(p.v, p.v_stride, b, h);
  const int64_t kend = imin(T, qb1 * BQ);  // causal: keys [0, kend) only; later tiles are fully masked
  for (int64_t k0 = 0; k0 < kend; k0 += BK) {
    const int64_t mk = imin(BK, kend - k0);
    auto* kb16 = reinterpret_cast<uint16_t*>(kbuf);
    auto* vp = reinterpret_cast<uint16_t*>(vbuf);
    Rows K{nullptr, 0}, V{nullptr, 0};
    if constexpr (pairs) {
      dense_rows_bf16(reinterpret_cast<const uint16_t*>(k_in), p.k_stride.seq, k0, mk, D, kb16);
      pair_pack_rows(reinterpret_cast<const uint16_t*>(v_in), p.v_stride.seq, k0, mk, D, vp, 2 * Dp);
    } else {
      K = dense_rows(k_in, p.k_stride.seq, k0, mk, D, kbuf);
      V = dense_rows(v_in, p.v_stride.seq, k0, mk, D, vbuf);
    }
    for (int64_t qb = imax(qb0, k0 / BQ); qb < qb1; ++qb) {
      const int64_t g = qb - qb0, q0 = qb * BQ, mq = imin(BQ, T - q0);
      const int64_t mkg = imin(mk, q0 + mq - k0);  // this block's keys of the tile
      float* qt = qt_of(g);
      float* acc = acc_of(g);
      float* m = stats_of(g);
      float* l = m + BQ;
      float* dacc = l + BQ;
      float* alpha = dacc + BQ;
      if constexpr (pairs)
        pair_gemm(mkg, BQ, (D + 1) / 2, kb16, Dp, 2, reinterpret_cast<const uint16_t*>(qt), 2 * BQ, st, BQ, false,
                  nullptr);
      else
        gemm(mkg, BQ, D, K.base, K.ld, 1, qt, BQ, st, BQ, false, nullptr);
      const bool diag = k0 + mkg - 1 > q0;  // some key of the tile is after some query
      for (int64_t iv = 0; iv < BQ; iv += lanes())
        softmax_lanes<pairs>(st + iv, mkg, q0, iv, k0, diag, score_scale, want_dist, m, l, dacc, alpha, p_pairs);
      // acc = diag(alpha) acc + P V, with P read from the transposed tile.
      if constexpr (pairs)
        pair_gemm(mq, D, (mkg + 1) / 2, p_pairs, 2, 2 * BQ, vp, 2 * Dp, acc, Dp, k0 > 0, alpha);
      else
        gemm(mq, D, mkg, st, 1, BQ, V.base, V.ld, acc, Dp, k0 > 0, alpha);
    }
  }

  In* o = slice<In>(p.o, p.o_stride, b, h);
  float* lse = p.lse + (b * f.H + h) * T;
  for (int64_t qb = qb0; qb < qb1; ++qb) {
    const int64_t q0 = qb * BQ, mq = imin(BQ, T - q0);
    const float* acc = acc_of(qb - qb0);
    const float* m = stats_of(qb - qb0);
    const float* l = m + BQ;
    const float* dacc = l + BQ;
    for (int64_t i = 0; i < mq; ++i) {
      const float inv = 1.0f / l[i];
      store_row(acc + i * Dp, o + (q0 + i) * p.o_stride.seq, D, inv);
      lse[q0 + i] = (m[i] + std::log2(l[i])) * kLn2;
      if (want_dist) p.distance[(b * f.H + h) * T + q0 + i] = dacc[i] * inv;
    }
  }
}

template <typename In, int kD>
void forward_dim(const AttentionForwardParams& p, const Launch& launch) {
  const int threads = launch.num_threads > 0 ? launch.num_threads : 1;
  Forward<In> f{p, forward_layout(p, threads, launch.isa), static_cast<float*>(launch.workspace),
                p.batch, p.heads, p.seq_len, ceil_div(p.seq_len, BQ)};
  const int64_t G = f.lay.group, groups = ceil_div(f.nqb, G), BH = f.B * f.H;
  // Groups of the latest query blocks (most keys) first, so the dynamic schedule ends evenly.
  parallel_items(BH * groups, threads, [&](int64_t it, int tid) {
    const int64_t gi = groups - 1 - it / BH, bh = it % BH;
    forward_item<In, kD>(f, bh / f.H, bh % f.H, gi * G, imin(f.nqb, (gi + 1) * G), f.ws + tid * f.lay.per_thread);
  });
}

template <typename In>
void forward_typed(const AttentionForwardParams& p, const Launch& launch) {
  switch (p.head_dim) {
    case 8: return forward_dim<In, 8>(p, launch);
    case 16: return forward_dim<In, 16>(p, launch);
    case 32: return forward_dim<In, 32>(p, launch);
    case 64: return forward_dim<In, 64>(p, launch);
    case 128: return forward_dim<In, 128>(p, launch);
    case 256: return forward_dim<In, 256>(p, launch);
    default: return forward_dim<In, 0>(p, launch);
  }
}

// ---------------------------------------------------------------- backward

template <typename In>
struct Backward {
  const AttentionBackwardParams& p;
  BackwardLayout lay;
  float* ws;
  int64_t B, H, T, nqb, nkb;

  // Split s's fp32 dq sums for (b, h): T rows of pad16(D) floats.
  float* dq_partial(int64_t b, int64_t h, int64_t s) const {
    return ws + lay.dq_partial + ((s * B + b) * H + h) * T * pad16(p.head_dim);
  }
};

// One (b, h) and one split of its key blocks: dK, dV per key block, dQ summed
// over them. The prologue lays out the (b, h)'s q and dout for the products
// every key block repeats (transposed for the score products; as dense fp32
// rows, or bf16 row pairs, for dK and dV) and computes delta = rowsum(dout o);
// k and v are laid out a key block at a time.
template <typename In, int kD>
void backward_item(const Backward<In>& f, int64_t b, int64_t h, int64_t split, float* th) {
  const auto& p = f.p;
  const DF df;
  const int64_t D = kD > 0 ? kD : p.head_dim, Dp = pad16(D), T = f.T;
  const int64_t first_q = (split * BK) / BQ;  // earliest query block that sees this split's keys
  constexpr bool pairs = use_pairs<In>();
  const In* q_in = slice<In>(p.q, p.q_stride, b, h);
  const In* k_in = slice<In>(p.k, p.k_stride, b, h);
  const In* v_in = slice<In>(p.v, p.v_stride, b, h);
  const In* g_in = slice<In>(p.dout, p.dout_stride, b, h);
  const In* o_in = slice<In>(p.o, p.o_stride, b, h);
  // bf16 views of the same inputs, for the pair path only.
  const auto* q16 = reinterpret_cast<const uint16_t*>(q_in);
  const auto* k16_in = reinterpret_cast<const uint16_t*>(k_in);
  const auto* v16_in = reinterpret_cast<const uint16_t*>(v_in);
  const auto* g16 = reinterpret_cast<const uint16_t*>(g_in);

  float* q_packed = th + f.lay.q_packed;
  float* dout_packed = th + f.lay.dout_packed;
  float* delta = th + f.lay.delta;
  const float c = p.scale * kLog2e;
  // The B operands of dK += dS^T q and dV += P^T dout: dense fp32 rows, or
  // (pair path) pairs of rows, ld 2 Dp.
  float* q_rows = th + f.lay.rows;
  float* g_rows = q_rows + f.nqb * BQ * Dp;
  auto* q_pairs = reinterpret_cast<uint16_t*>(q_rows);
  uint16_t* g_pairs = q_pairs + f.nqb * BQ * Dp;  // bf16 rows: half the floats of fp32 ones
  for (int64_t qb = first_q; qb < f.nqb; ++qb) {
    const int64_t q0 = qb * BQ, mq = imin(BQ, T - q0);
    float* qt = q_packed + qb * f.lay.pack_stride;
    float* dot = dout_packed + qb * f.lay.pack_stride;
    if constexpr (pairs) {
      pair_pack_rows(q16, p.q_stride.seq, q0, mq, D, q_pairs + q0 * Dp, 2 * Dp);
      pair_pack_rows(g16, p.dout_stride.seq, q0, mq, D, g_pairs + q0 * Dp, 2 * Dp);
      pair_pack(q16, p.q_stride.seq, q0, mq, D, reinterpret_cast<uint16_t*>(qt));
      pair_pack(g16, p.dout_stride.seq, q0, mq, D, reinterpret_cast<uint16_t*>(dot));
    } else {
      dense_rows(q_in, p.q_stride.seq, q0, mq, D, q_rows + q0 * Dp);
      dense_rows(g_in, p.dout_stride.seq, q0, mq, D, g_rows + q0 * Dp);
      transposed_tile(q_rows + q0 * Dp, Dp, 0, mq, D, c, qt);
      transposed_tile(g_rows + q0 * Dp, Dp, 0, mq, D, 1.0f, dot);
    }
    for (int64_t t = q0; t < q0 + mq; ++t) {
      VF acc = hn::Zero(df);
      const In* gr = g_in + t * p.dout_stride.seq;
      const In* orow = o_in + t * p.o_stride.seq;
      for (int64_t d = 0; d < D; d += lanes()) acc = hn::MulAdd(load_part(gr + d, D - d), load_part(orow + d, D - d), acc);
      delta[t] = hn::GetLane(hn::SumOfLanes(df, acc));
    }
  }
  if (p.delta && split == 0)
    for (int64_t t = 0; t < T; ++t) p.delta[(b * f.H + h) * T + t] = delta[t];

  // Where this item sums dq (dS already carries the softmax scale): dense fp32 rows.
  const MutRows dq{f.lay.nsplit > 1 ? f.dq_partial(b, h, split) : th + f.lay.dq_acc, Dp};
  for (int64_t t = first_q * BQ; t < T; ++t) zero_row(dq.row(t), Dp);

  float* pt = th + f.lay.tiles;  // BK x BQ: probabilities, transposed
  float* dst = pt + BK * BQ;     // BK x BQ: dP, then dS (scaled), transposed
  float* dk = dst + BK * BQ;     // BK x Dp: dK sums
  float* dv = dk + BK * Dp;      // BK x Dp: dV sums
  float* ktile = dv + BK * Dp;   // BK x Dp: dense fp32 k rows (pair path: k row pairs)
  float* vtile = ktile + BK * Dp;
  auto* k16 = reinterpret_cast<uint16_t*>(vtile + BK * Dp);  // pair path: dense bf16 k and v rows
  uint16_t* v16 = k16 + BK * Dp;
  auto* k_pairs = reinterpret_cast<uint16_t*>(ktile);
  // Pair path: P^T and dS^T rounded to bf16 (A of dV, dK), dS^T as pairs of key rows (A of dQ).
  auto* p16 = reinterpret_cast<uint16_t*>(th + f.lay.pair_tiles);
  uint16_t* ds16 = p16 + BK * BQ;
  uint16_t* ds_pairs = ds16 + BK * BQ;
  const float* lse = p.lse + (b * f.H + h) * T;
  In* dk_out = slice<In>(p.dk, p.dk_stride, b, h);
  In* dv_out = slice<In>(p.dv, p.dv_stride, b, h);
  const VF scale = hn::Set(df, p.scale);
  const VF ss = hn::Set(df, pairs ? c : 1.0f);  // pair products are unscaled

  for (int64_t kb = split; kb < f.nkb; kb += f.lay.nsplit) {
    const int64_t k0 = kb * BK, mk = imin(BK, T - k0);
    Rows K{nullptr, 0}, V{nullptr, 0};
    if constexpr (pairs) {
      dense_rows_bf16(k16_in, p.k_stride.seq, k0, mk, D, k16);
      dense_rows_bf16(v16_in, p.v_stride.seq, k0, mk, D, v16);
      pair_pack_rows(k16_in, p.k_stride.seq, k0, mk, D, k_pairs, 2 * Dp);
    } else {
      K = dense_rows(k_in, p.k_stride.seq, k0, mk, D, ktile);
      V = dense_rows(v_in, p.v_stride.seq, k0, mk, D, vtile);
    }
    // Query blocks before k0 / BQ see none of these keys: skipped.
    for (int64_t qb = k0 / BQ; qb < f.nqb; ++qb) {
      const int64_t q0 = qb * BQ, mq = imin(BQ, T - q0);
      if constexpr (pairs) {
        const int64_t np = (D + 1) / 2;
        const auto* qt = reinterpret_cast<const uint16_t*>(q_packed + qb * f.lay.pack_stride);
        const auto* dot = reinterpret_cast<const uint16_t*>(dout_packed + qb * f.lay.pack_stride);
        pair_gemm(mk, BQ, np, k16, Dp, 2, qt, 2 * BQ, pt, BQ, false, nullptr);
        pair_gemm(mk, BQ, np, v16, Dp, 2, dot, 2 * BQ, dst, BQ, false, nullptr);
      } else {
        gemm(mk, BQ, D, K.base, K.ld, 1, q_packed + qb * f.lay.pack_stride, BQ, pt, BQ, false, nullptr);
        gemm(mk, BQ, D, V.base, V.ld, 1, dout_packed + qb * f.lay.pack_stride, BQ, dst, BQ, false, nullptr);
      }
      const bool edge = k0 + mk - 1 > q0 || mq < BQ;  // causal mask or rows past T inside the tile
      for (int64_t iv = 0; iv < BQ; iv += lanes()) {
        const VF lse2 = hn::Mul(load_part(lse + q0 + iv, mq - iv), hn::Set(df, kLog2e));
        const VF dl = load_part(delta + q0 + iv, mq - iv);
        const VF qi = hn::Iota(df, static_cast<float>(q0 + iv));
        VF ds_prev = hn::Zero(df);
        for (int64_t j = 0; j < mk; ++j) {
          VF pj = exp2v(hn::Sub(hn::Mul(hn::LoadU(df, pt + j * BQ + iv), ss), lse2));
          if (edge) pj = keep_between(pj, qi, static_cast<float>(k0 + j), static_cast<float>(T - 1), 0.0f);
          const VF ds = hn::Mul(hn::Mul(pj, hn::Sub(hn::LoadU(df, dst + j * BQ + iv), dl)), scale);
          if constexpr (pairs) {
            hn::StoreU(narrow_bf16(pj), DU16(), p16 + j * BQ + iv);
            hn::StoreU(narrow_bf16(ds), DU16(), ds16 + j * BQ + iv);
            if (j % 2 == 1 || j + 1 == mk)  // rows (j - 1, j), or the last row with a zero partner
              store_pairs(ds_pairs + ((j / 2) * BQ + iv) * 2, j % 2 ? ds_prev : ds, j % 2 ? ds : hn::Zero(df));
            ds_prev = ds;
          } else {
            hn::StoreU(pj, df, pt + j * BQ + iv);
            hn::StoreU(ds, df, dst + j * BQ + iv);
          }
        }
      }
      const bool acc = qb > k0 / BQ;
      if constexpr (pairs) {
        const int64_t iq = (mq + 1) / 2, jk = (mk + 1) / 2;
        pair_gemm(mk, D, iq, p16, BQ, 2, g_pairs + q0 * Dp, 2 * Dp, dv, Dp, acc, nullptr);             // dV += P^T dO
        pair_gemm(mk, D, iq, ds16, BQ, 2, q_pairs + q0 * Dp, 2 * Dp, dk, Dp, acc, nullptr);            // dK += dS^T Q
        pair_gemm(mq, D, jk, ds_pairs, 2, 2 * BQ, k_pairs, 2 * Dp, dq.row(q0), dq.ld, true, nullptr);  // dQ += dS K
      } else {
        gemm(mk, D, mq, pt, BQ, 1, g_rows + q0 * Dp, Dp, dv, Dp, acc, nullptr);        // dV += P^T dO
        gemm(mk, D, mq, dst, BQ, 1, q_rows + q0 * Dp, Dp, dk, Dp, acc, nullptr);       // dK += dS^T Q
        gemm(mq, D, mk, dst, 1, BQ, K.base, K.ld, dq.row(q0), dq.ld, true, nullptr);  // dQ += dS K
      }
    }
    for (int64_t j = 0; j < mk; ++j) {
      store_row(dk + j * Dp, dk_out + (k0 + j) * p.dk_stride.seq, D, 1.0f);
      store_row(dv + j * Dp, dv_out + (k0 + j) * p.dv_stride.seq, D, 1.0f);
    }
  }
  if (f.lay.nsplit == 1) {
    In* out = slice<In>(p.dq, p.dq_stride, b, h);
    for (int64_t t = 0; t < T; ++t) store_row(dq.row(t), out + t * p.dq_stride.seq, D, 1.0f);
  }
}

template <typename In, int kD>
void backward_dim(const AttentionBackwardParams& p, const Launch& launch) {
  const int threads = launch.num_threads > 0 ? launch.num_threads : 1;
  Backward<In> f{p, backward_layout(p, threads, launch.isa), static_cast<float*>(launch.workspace),
                 p.batch, p.heads, p.seq_len, ceil_div(p.seq_len, BQ), ceil_div(p.seq_len, BK)};
  const int64_t BH = f.B * f.H, D = p.head_dim, Dp = pad16(D);
  parallel_items(BH * f.lay.nsplit, threads, [&](int64_t it, int tid) {
    const int64_t bh = it / f.lay.nsplit;
    backward_item<In, kD>(f, bh / f.H, bh % f.H, it % f.lay.nsplit, f.ws + f.lay.scratch + tid * f.lay.per_thread);
  });
  if (f.lay.nsplit == 1) return;
  // Sum the splits' partial dq into the output (and convert to its dtype).
  parallel_items(BH * f.nqb, threads, [&](int64_t it, int) {
    const DF df;
    const int64_t bh = it / f.nqb, b = bh / f.H, h = bh % f.H, q0 = (it % f.nqb) * BQ, mq = imin(BQ, f.T - q0);
    In* out = slice<In>(p.dq, p.dq_stride, b, h);
    for (int64_t t = q0; t < q0 + mq; ++t) {
      float* first = f.dq_partial(b, h, 0) + t * Dp;
      // Split s summed into query rows from its first key block on; the rows before stay unwritten.
      for (int64_t s = 1; s < f.lay.nsplit && s * BK <= t; ++s) {
        const float* other = f.dq_partial(b, h, s) + t * Dp;
        for (int64_t d = 0; d < D; d += lanes())
          hn::StoreU(hn::Add(hn::LoadU(df, first + d), hn::LoadU(df, other + d)), df, first + d);
      }
      store_row(first, out + t * p.dq_stride.seq, D, 1.0f);
    }
  });
}

template <typename In>
void backward_typed(const AttentionBackwardParams& p, const Launch& launch) {
  switch (p.head_dim) {
    case 8: return backward_dim<In, 8>(p, launch);
    case 16: return backward_dim<In, 16>(p, launch);
    case 32: return backward_dim<In, 32>(p, launch);
    case 64: return backward_dim<In, 64>(p, launch);
    case 128: return backward_dim<In, 128>(p, launch);
    case 256: return backward_dim<In, 256>(p, launch);
    default: return backward_dim<In, 0>(p, launch);
  }
}

}  // namespace

// Entry points of this instruction set, called by the dispatcher
// (attention_cpu.cpp), which has checked the dtype (F32 or BF16), that this
// CPU supports the target, and that its vectors divide a 64-wide tile.
void forward(const AttentionForwardParams& p, const Launch& launch) {
  if (p.batch * p.heads * p.seq_len * p.head_dim == 0) return;
  if (p.dtype == DType::BF16)
    forward_typed<uint16_t>(p, launch);
  else
    forward_typed<float>(p, launch);
}

void backward(const AttentionBackwardParams& p, const Launch& launch) {
  if (p.batch * p.heads * p.seq_len * p.head_dim == 0) return;
  if (p.dtype == DType::BF16)
    backward_typed<uint16_t>(p, launch);
  else
    backward_typed<float>(p, launch);
}

// Floats per vector on this CPU for this target (4, 8 or 16; other SVE
// lengths do not divide a 64-wide tile and are refused by the dispatcher).
int64_t vector_floats() { return lanes(); }

}  // namespace HWY_NAMESPACE
}  // namespace PRISM_KERNEL_NS
HWY_AFTER_NAMESPACE();

#endif  // !PRISM_BF16_DOT || PRISM_PAIRS
#undef PRISM_PAIRS
#endif  // per-target include guard
