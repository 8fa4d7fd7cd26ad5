// The fused causal attention algorithm, written once against the Vec type of
// simd.h and compiled once per instruction set: attention_<isa>.cpp defines
// PRISM_ISA_NS and includes this file (so it has no include guard on purpose).
//
// Tiles are stored transposed: a score tile holds keys in rows and queries in
// the 16-float lanes, so the online softmax (row max, rescale, row sums, the
// distance accumulator sum_j p_ij j) is purely lane-wise with no horizontal
// reductions, and every matrix product below is one register-tiled kernel
// C[M x N] (+)= A[M x K] B[K x N] with A read through arbitrary strides.
#include <cmath>
#include <cstdint>
#include <limits>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu/attention_cpu.h"
#include "cpu/simd.h"
#include "cpu/workspace.h"

namespace prism::kernels::cpu::PRISM_ISA_NS {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.69314718055994531f;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t BQ = kBlockQ, BK = kBlockK;
#if defined(__AVX512F__)
// 6 x 64 floats: 24 zmm accumulators, 4 for B, 1 broadcast.
constexpr int kMR = 6;  // rows of a register tile
constexpr int kNV = 4;  // vectors per row of a register tile
#else
// The portable build has 16 SSE registers: a 2 x 16 tile keeps its accumulators in them.
constexpr int kMR = 2;
constexpr int kNV = 1;
#endif
static_assert(BQ % kLanes == 0 && BQ % (kLanes * kNV) == 0, "a query block is whole register-tile rows wide");
static_assert(BQ == BK, "causal tile skipping assumes square tiles: key block kb ends at query block kb");

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t pad16(int64_t n) { return ceil_div(n, 16) * 16; }

inline float to_float(float x) { return x; }
inline float to_float(uint16_t x) { return bf16_to_float(x); }
inline Vec vload_in(const float* p, Mask m) { return vload(p, m); }
inline Vec vload_in(const uint16_t* p, Mask m) { return vload_bf16(p, m); }
inline void vstore_out(float* p, Vec a, Mask m) { vstore(p, a, m); }
inline void vstore_out(uint16_t* p, Vec a, Mask m) { vstore_bf16(p, a, m); }

// dst[0:n] = src[0:n] * scale, converting to the output type.
template <typename Out>
inline void store_row(const float* src, Out* dst, int64_t n, float scale) {
  const Vec s = vset(scale);
  for (int64_t i = 0; i < n; i += kLanes) {
    const Mask m = tail_mask(n - i);
    vstore_out(dst + i, vload(src + i, m) * s, m);
  }
}
inline void convert_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const Mask m = tail_mask(n - i);
    vstore(dst + i, vload_bf16(src + i, m), m);
  }
}
inline void zero_row(float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) vstore(dst + i, vzero(), tail_mask(n - i));
}

// One register tile: C[MR x 16 NV] = (accumulate ? row_scale * C : 0) + A B,
// A(r, k) = a[r a_rs + k a_cs], B row k = b + k ldb; the last vector of each
// row is masked by `last`.
template <int MR, int NV>
inline void micro_tile(int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb, float* c,
                       int64_t ldc, bool accumulate, const float* row_scale, Mask last) {
  Vec acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = vzero();
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    Vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = v + 1 < NV ? vload(bk + kLanes * v) : vload(bk + kLanes * v, last);
    const float* ak = a + k * a_cs;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const Vec av = vset(ak[r * a_rs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = vfmadd(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      const Vec s = vset(row_scale ? row_scale[r] : 1.0f);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const Vec old = v + 1 < NV ? vload(cr + kLanes * v) : vload(cr + kLanes * v, last);
        acc[r][v] = vfmadd(old, s, acc[r][v]);
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (v + 1 < NV)
        vstore(cr + kLanes * v, acc[r][v]);
      else
        vstore(cr + kLanes * v, acc[r][v], last);
    }
  }
}

template <int MR>
inline void tile_rows(int nv, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                      float* c, int64_t ldc, bool accumulate, const float* row_scale, Mask last) {
  if constexpr (kNV == 1) {
    (void)nv;
    return micro_tile<MR, 1>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
  } else {
    switch (nv) {
      case 1: return micro_tile<MR, 1>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
      case 2: return micro_tile<MR, 2>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
      case 3: return micro_tile<MR, 3>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
      default: return micro_tile<MR, 4>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
    }
  }
}

// A register tile of exactly `rows` (< kMR) rows.
template <int R = kMR - 1>
inline void tail_rows(int64_t rows, int nv, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                      int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale, Mask last) {
  if constexpr (R >= 1) {
    if (rows == R) return tile_rows<R>(nv, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
    tail_rows<R - 1>(rows, nv, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
  }
}

// C[M x N] = (accumulate ? diag(row_scale) C : 0) + A[M x K] B[K x N] for K <= kKc.
inline void gemm_panel(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                       int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale) {
  for (int64_t n0 = 0; n0 < N; n0 += kLanes * kNV) {
    const int64_t nn = imin(kLanes * kNV, N - n0);
    const int nv = static_cast<int>(ceil_div(nn, kLanes));
    const Mask last = tail_mask(nn - kLanes * (nv - 1));
    int64_t m0 = 0;
    auto at = [&](int64_t m) { return row_scale ? row_scale + m : nullptr; };
    for (; m0 + kMR <= M; m0 += kMR)
      tile_rows<kMR>(nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0), last);
    if (m0 < M)  // the last M - m0 < kMR rows
      tail_rows(M - m0, nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0),
                last);
  }
}

// Rows of B per pass: a 64-column panel of them (16 KiB) stays in L1 while
// every register tile of A streams past it.
constexpr int64_t kKc = 64;

// C[M x N] = (accumulate ? diag(row_scale) C : 0) + A[M x K] B[K x N]; row_scale may be null (= 1).
inline void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                 int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale) {
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const bool first = k0 == 0;
    gemm_panel(M, N, imin(kKc, K - k0), a + k0 * a_cs, a_rs, a_cs, b + k0 * ldb, ldb, c, ldc, !first || accumulate,
               first ? row_scale : nullptr);
  }
}

// The bf16 path multiplies with the AVX512-BF16 pair dot product: exact
// products of two bf16 pairs summed into fp32, twice the work per instruction
// of an fp32 FMA. Score products take the bf16 inputs as they are; products
// with probabilities or dS round those to bf16 first, as FlashAttention does
// (their sums, the row statistics and every accumulator stay fp32).
// Operands are "pair-packed" along the contraction: A's pair (r, k) is two
// adjacent bf16 at a + r a_rs + k a_ps; B's pair row k holds, for column n,
// the pair (x[2k][n], x[2k + 1][n]) at b + k ldb + 2n.
template <typename In>
constexpr bool use_pair_dot() {
#if defined(__AVX512BF16__)
  return sizeof(In) == 2;
#else
  return false;
#endif
}

#if defined(__AVX512BF16__)
template <int MR, int NV>
inline void pair_micro(int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps, const uint16_t* b, int64_t ldb,
                       float* c, int64_t ldc, bool accumulate, const float* row_scale, Mask last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < pairs; ++k) {
    const uint16_t* bk = b + k * ldb;
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = (__m512bh)(v + 1 < NV ? _mm512_loadu_si512(bk + 2 * kLanes * v)
                                    : _mm512_maskz_loadu_epi32(last, bk + 2 * kLanes * v));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, a + r * a_rs + k * a_ps, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      const __m512 s = _mm512_set1_ps(row_scale ? row_scale[r] : 1.0f);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const __m512 old = v + 1 < NV ? _mm512_loadu_ps(cr + kLanes * v) : _mm512_maskz_loadu_ps(last, cr + kLanes * v);
        acc[r][v] = _mm512_fmadd_ps(old, s, acc[r][v]);
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (v + 1 < NV)
        _mm512_storeu_ps(cr + kLanes * v, acc[r][v]);
      else
        _mm512_mask_storeu_ps(cr + kLanes * v, last, acc[r][v]);
    }
  }
}

template <int MR>
inline void pair_rows(int nv, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps, const uint16_t* b,
                      int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale, Mask last) {
  switch (nv) {
    case 1: return pair_micro<MR, 1>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale, last);
    case 2: return pair_micro<MR, 2>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale, last);
    case 3: return pair_micro<MR, 3>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale, last);
    default: return pair_micro<MR, 4>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale, last);
  }
}

template <int R = kMR - 1>
inline void pair_tail_rows(int64_t rows, int nv, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps,
                           const uint16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                           const float* row_scale, Mask last) {
  if constexpr (R >= 1) {
    if (rows == R) return pair_rows<R>(nv, pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale, last);
    pair_tail_rows<R - 1>(rows, nv, pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale, last);
  }
}

// C[M x N] = (accumulate ? diag(row_scale) C : 0) + A B over `pairs` pairs of
// the contraction; K-blocked like gemm() in panels of kKc pairs.
inline void pair_gemm(int64_t M, int64_t N, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps,
                      const uint16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                      const float* row_scale) {
  for (int64_t p0 = 0; p0 < pairs; p0 += kKc) {
    const int64_t np = imin(kKc, pairs - p0);
    const bool acc = p0 > 0 || accumulate;
    const float* rs = p0 > 0 ? nullptr : row_scale;
    const uint16_t* ap = a + p0 * a_ps;
    const uint16_t* bp = b + p0 * ldb;
    for (int64_t n0 = 0; n0 < N; n0 += kLanes * kNV) {
      const int64_t nn = imin(kLanes * kNV, N - n0);
      const int nv = static_cast<int>(ceil_div(nn, kLanes));
      const Mask last = tail_mask(nn - kLanes * (nv - 1));
      int64_t m0 = 0;
      for (; m0 + kMR <= M; m0 += kMR)
        pair_rows<kMR>(nv, np, ap + m0 * a_rs, a_rs, a_ps, bp + 2 * n0, ldb, c + m0 * ldc + n0, ldc, acc,
                       rs ? rs + m0 : nullptr, last);
      if (m0 < M)
        pair_tail_rows(M - m0, nv, np, ap + m0 * a_rs, a_rs, a_ps, bp + 2 * n0, ldb, c + m0 * ldc + n0, ldc, acc,
                       rs ? rs + m0 : nullptr, last);
    }
  }
}

// [a0 .. a15 | b0 .. b15] (bf16) -> [a0 b0 a1 b1 .. a15 b15]
inline __m512i interleave_halves(__m512i x) {
  alignas(64) static const uint16_t idx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                               8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(idx), x);
}
// Pairs (lo[n], hi[n]) of two fp32 rows, rounded to bf16, for the lanes in m.
inline void store_pairs(uint16_t* dst, Vec lo, Vec hi, Mask m) {
  const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi.v, lo.v);  // low half: lo
  _mm512_mask_storeu_epi32(dst, m, interleave_halves(h));
}
// Pairs (r0[n], r1[n]) of two bf16 rows; r1 may be null (zeros).
inline void store_pairs(uint16_t* dst, const uint16_t* r0, const uint16_t* r1, Mask m) {
  const __m256i a = _mm256_maskz_loadu_epi16(m, r0);
  const __m256i b = r1 ? _mm256_maskz_loadu_epi16(m, r1) : _mm256_setzero_si256();
  _mm512_mask_storeu_epi32(dst, m, interleave_halves(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1)));
}
// Pair-packs rows [t0, t0 + n) of a bf16 slice along the rows, for pair_gemm's
// B: pair row k of `out` (ld = out_ld) pairs rows t0 + 2k and t0 + 2k + 1;
// rows at or past n count as zeros.
inline void pair_pack_rows(const uint16_t* x, int64_t ld, int64_t t0, int64_t n, int64_t D, uint16_t* out,
                           int64_t out_ld) {
  for (int64_t k = 0; 2 * k < n; ++k) {
    const uint16_t* r0 = x + (t0 + 2 * k) * ld;
    const uint16_t* r1 = 2 * k + 1 < n ? r0 + ld : nullptr;
    for (int64_t d = 0; d < D; d += kLanes) store_pairs(out + k * out_ld + 2 * d, r0 + d, r1 ? r1 + d : nullptr,
                                                        tail_mask(D - d));
  }
}
#else
// Not compiled for this ISA: use_pair_dot() is false, so these are never called.
inline void pair_gemm(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, float*,
                      int64_t, bool, const float*) {}
inline void store_pairs(uint16_t*, Vec, Vec, Mask) {}
inline void pair_pack_rows(const uint16_t*, int64_t, int64_t, int64_t, int64_t, uint16_t*, int64_t) {}
#endif

// Pair-packs rows [t0, t0 + n) of a bf16 (b, h) slice along D, transposed, for
// the score products' B: pair p of column i at out[(p BQ + i) 2]; columns past
// n and a last odd element's partner are zero.
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

// ---------------------------------------------------------------- forward

template <typename In>
struct Forward {
  const AttentionForwardParams& p;
  ForwardLayout lay;
  float* ws;
  int64_t B, H, T, nqb;
};

inline void copy_row(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const Mask m = tail_mask(n - i);
    vstore(dst + i, vload(src + i, m), m);
  }
}
inline void copy_row(const uint16_t* src, float* dst, int64_t n) { convert_row(src, dst, n); }

// Rows [t0, t0 + n) of a (b, h) slice, copied (and converted to fp32) into a
// dense tile with row stride pad16(D). The copy is cheap next to the products
// that reuse it, and the input's own row stride (3 d_model floats for a fused
// qkv projection, a multiple of 1 KiB) would map a tile's rows onto a few
// L1 sets and evict itself.
template <typename In>
Rows dense_rows(const In* x, int64_t ld, int64_t t0, int64_t n, int64_t D, float* buf) {
  const int64_t dp = pad16(D);
  for (int64_t t = 0; t < n; ++t) copy_row(x + (t0 + t) * ld, buf + t * dp, D);
  return {buf, dp};
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
  // bf16 path: probabilities as bf16 pairs of key rows, (BK / 2) x BQ pairs.
  auto* p_pairs = reinterpret_cast<uint16_t*>(thread_ws + f.lay.p_pairs);
  const bool want_dist = p.distance != nullptr;
  // Per query block g of the group:
  auto qt_of = [&](int64_t g) { return thread_ws + f.lay.q_tile + g * f.lay.q_tile_size; };    // D x BQ, transposed
  auto acc_of = [&](int64_t g) { return thread_ws + f.lay.out_acc + g * BQ * Dp; };           // BQ x Dp, unnormalised
  auto stats_of = [&](int64_t g) { return thread_ws + f.lay.row_stats + g * 4 * BQ; };        // m, l, dacc, alpha

  const In* q = slice<In>(p.q, p.q_stride, b, h);
  const float c = p.scale * kLog2e;
  constexpr bool pairs = use_pair_dot<In>();
  // Scores come out in log2 units: the scale is folded into the fp32 q tile,
  // or applied to the scores when they are bf16 pair dot products.
  const float score_scale = pairs ? c : 1.0f;
  for (int64_t qb = qb0; qb < qb1; ++qb) {
    const int64_t q0 = qb * BQ, mq = imin(BQ, T - q0);
    float* qt = qt_of(qb - qb0);
    if constexpr (pairs) {
      pair_pack(reinterpret_cast<const uint16_t*>(q), p.q_stride.seq, q0, mq, D, reinterpret_cast<uint16_t*>(qt));
    } else {
      for (int64_t i = 0; i < BQ; ++i) {
        if (i < mq) {
          const In* qr = q + (q0 + i) * p.q_stride.seq;
          for (int64_t d = 0; d < D; ++d) qt[d * BQ + i] = to_float(qr[d]) * c;
        } else {
          for (int64_t d = 0; d < D; ++d) qt[d * BQ + i] = 0.0f;
        }
      }
    }
    float* m = stats_of(qb - qb0);
    for (int64_t i = 0; i < BQ; i += kLanes) {
      vstore(m + i, vset(-kInf));      // running max (log2 units)
      vstore(m + BQ + i, vzero());     // running sum of exp2(s - m)
      vstore(m + 2 * BQ + i, vzero()); // running sum of exp2(s - m) * j
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
      const Vec ss = vset(score_scale);
      for (int64_t iv = 0; iv < BQ; iv += kLanes) {
        float* s = st + iv;
        const Vec qi = viota(static_cast<float>(q0 + iv));
        const Vec m_old = vload(m + iv);
        Vec mx = m_old;
        if (diag || pairs) {
          for (int64_t j = 0; j < mkg; ++j) {
            Vec x = vload(s + j * BQ) * ss;
            if (diag) x = vkeep_between(x, qi, static_cast<float>(k0 + j), kInf, -kInf);
            vstore(s + j * BQ, x);
            mx = vmax(mx, x);
          }
        } else {
          for (int64_t j = 0; j < mkg; ++j) mx = vmax(mx, vload(s + j * BQ));
        }
        const Vec al = vexp2(m_old - mx);
        Vec ls = vzero(), ds = vzero();
        // Two key rows at a time: the bf16 path stores them as pairs for P V.
        for (int64_t j = 0; j < mkg; j += 2) {
          const bool two = j + 1 < mkg;
          const Vec p0 = vexp2(vload(s + j * BQ) - mx);
          const Vec p1 = two ? vexp2(vload(s + (j + 1) * BQ) - mx) : vzero();
          ls = ls + p0 + p1;
          if (want_dist)
            ds = vfmadd(p0, vset(static_cast<float>(k0 + j)), vfmadd(p1, vset(static_cast<float>(k0 + j + 1)), ds));
          if constexpr (pairs) {
            store_pairs(p_pairs + ((j / 2) * BQ + iv) * 2, p0, p1, tail_mask(kLanes));
          } else {
            vstore(s + j * BQ, p0);
            if (two) vstore(s + (j + 1) * BQ, p1);
          }
        }
        if (want_dist) vstore(dacc + iv, vfmadd(vload(dacc + iv), al, ds));
        vstore(m + iv, mx);
        vstore(l + iv, vfmadd(vload(l + iv), al, ls));
        vstore(alpha + iv, al);
      }
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
      if (want_dist) p.distance[(b * f.H + h) * T + q0 + i] = static_cast<float>(q0 + i) - dacc[i] * inv;
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

  // Split s's fp32 dq sums when they are not dq itself.
  float* dq_partial(int64_t b, int64_t h, int64_t s) const {
    const int64_t index = s - (lay.dq_direct ? 1 : 0);
    return ws + lay.dq_partial + ((index * B + b) * H + h) * T * p.head_dim;
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
  const int64_t D = kD > 0 ? kD : p.head_dim, Dp = pad16(D), T = f.T;
  const int64_t first_q = (split * BK) / BQ;  // earliest query block that sees this split's keys
  constexpr bool pairs = use_pair_dot<In>();
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
  // (bf16 path) pairs of rows, ld 2 Dp.
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
      for (int64_t i = 0; i < BQ; ++i) {
        if (i < mq) {
          const float* qr = q_rows + (q0 + i) * Dp;
          const float* gr = g_rows + (q0 + i) * Dp;
          for (int64_t d = 0; d < D; ++d) {
            qt[d * BQ + i] = qr[d] * c;
            dot[d * BQ + i] = gr[d];
          }
        } else {
          for (int64_t d = 0; d < D; ++d) qt[d * BQ + i] = dot[d * BQ + i] = 0.0f;
        }
      }
    }
    for (int64_t t = q0; t < q0 + mq; ++t) {
      Vec acc = vzero();
      const In* gr = g_in + t * p.dout_stride.seq;
      const In* orow = o_in + t * p.o_stride.seq;
      for (int64_t d = 0; d < D; d += kLanes) {
        const Mask mk = tail_mask(D - d);
        acc = vfmadd(vload_in(gr + d, mk), vload_in(orow + d, mk), acc);
      }
      delta[t] = vsum(acc);
    }
  }
  if (p.delta && split == 0)
    for (int64_t t = 0; t < T; ++t) p.delta[(b * f.H + h) * T + t] = delta[t];

  // Where this item sums dq (dS already carries the softmax scale).
  MutRows dq;
  if (f.lay.dq_direct && split == 0)
    dq = {slice<float>(p.dq, p.dq_stride, b, h), p.dq_stride.seq};
  else if (f.lay.nsplit > 1)
    dq = {f.dq_partial(b, h, split), D};
  else
    dq = {th + f.lay.dq_acc, D};
  for (int64_t t = 0; t < T; ++t) zero_row(dq.row(t), D);

  float* pt = th + f.lay.tiles;  // BK x BQ: probabilities, transposed
  float* dst = pt + BK * BQ;     // BK x BQ: dP, then dS (scaled), transposed
  float* dk = dst + BK * BQ;     // BK x Dp: dK sums
  float* dv = dk + BK * Dp;      // BK x Dp: dV sums
  float* ktile = dv + BK * Dp;   // BK x Dp: dense fp32 k rows (bf16 path: k row pairs)
  float* vtile = ktile + BK * Dp;
  auto* k16 = reinterpret_cast<uint16_t*>(vtile + BK * Dp);  // bf16 path: dense bf16 k and v rows
  uint16_t* v16 = k16 + BK * Dp;
  auto* k_pairs = reinterpret_cast<uint16_t*>(ktile);
  // bf16 path: P^T and dS^T rounded to bf16 (A of dV, dK), dS^T as pairs of key rows (A of dQ).
  auto* p16 = reinterpret_cast<uint16_t*>(th + f.lay.pair_tiles);
  uint16_t* ds16 = p16 + BK * BQ;
  uint16_t* ds_pairs = ds16 + BK * BQ;
  const float* lse = p.lse + (b * f.H + h) * T;
  In* dk_out = slice<In>(p.dk, p.dk_stride, b, h);
  In* dv_out = slice<In>(p.dv, p.dv_stride, b, h);
  const Vec scale = vset(p.scale);
  const Vec ss = vset(pairs ? c : 1.0f);  // pair products are unscaled

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
      for (int64_t iv = 0; iv < BQ; iv += kLanes) {
        const Mask mv = tail_mask(mq - iv);
        const Vec lse2 = vload(lse + q0 + iv, mv) * vset(kLog2e);
        const Vec dl = vload(delta + q0 + iv, mv);
        const Vec qi = viota(static_cast<float>(q0 + iv));
        Vec ds_prev = vzero();
        for (int64_t j = 0; j < mk; ++j) {
          Vec pj = vexp2(vload(pt + j * BQ + iv) * ss - lse2);
          if (edge) pj = vkeep_between(pj, qi, static_cast<float>(k0 + j), static_cast<float>(T - 1), 0.0f);
          const Vec ds = pj * (vload(dst + j * BQ + iv) - dl) * scale;
          if constexpr (pairs) {
            vstore_bf16(p16 + j * BQ + iv, pj, tail_mask(kLanes));
            vstore_bf16(ds16 + j * BQ + iv, ds, tail_mask(kLanes));
            if (j % 2 == 1 || j + 1 == mk)  // rows (j - 1, j), or the last row with a zero partner
              store_pairs(ds_pairs + ((j / 2) * BQ + iv) * 2, j % 2 ? ds_prev : ds, j % 2 ? ds : vzero(),
                          tail_mask(kLanes));
            ds_prev = ds;
          } else {
            vstore(pt + j * BQ + iv, pj);
            vstore(dst + j * BQ + iv, ds);
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
  if (f.lay.nsplit == 1 && !f.lay.dq_direct) {
    In* out = slice<In>(p.dq, p.dq_stride, b, h);
    for (int64_t t = 0; t < T; ++t) store_row(dq.row(t), out + t * p.dq_stride.seq, D, 1.0f);
  }
}

template <typename In, int kD>
void backward_dim(const AttentionBackwardParams& p, const Launch& launch) {
  const int threads = launch.num_threads > 0 ? launch.num_threads : 1;
  Backward<In> f{p, backward_layout(p, threads, launch.isa), static_cast<float*>(launch.workspace),
                 p.batch, p.heads, p.seq_len, ceil_div(p.seq_len, BQ), ceil_div(p.seq_len, BK)};
  const int64_t BH = f.B * f.H, D = p.head_dim;
  parallel_items(BH * f.lay.nsplit, threads, [&](int64_t it, int tid) {
    const int64_t bh = it / f.lay.nsplit;
    backward_item<In, kD>(f, bh / f.H, bh % f.H, it % f.lay.nsplit, f.ws + f.lay.scratch + tid * f.lay.per_thread);
  });
  if (f.lay.nsplit == 1) return;
  // Sum the splits' partial dq into the output (and convert to its dtype).
  parallel_items(BH * f.nqb, threads, [&](int64_t it, int) {
    const int64_t bh = it / f.nqb, b = bh / f.H, h = bh % f.H, q0 = (it % f.nqb) * BQ, mq = imin(BQ, f.T - q0);
    In* out = slice<In>(p.dq, p.dq_stride, b, h);
    for (int64_t t = q0; t < q0 + mq; ++t) {
      float* first = f.lay.dq_direct ? slice<float>(p.dq, p.dq_stride, b, h) + t * p.dq_stride.seq
                                     : f.dq_partial(b, h, 0) + t * D;
      for (int64_t s = 1; s < f.lay.nsplit; ++s) {
        const float* other = f.dq_partial(b, h, s) + t * D;
        for (int64_t d = 0; d < D; d += kLanes) {
          const Mask m = tail_mask(D - d);
          vstore(first + d, vload(first + d, m) + vload(other + d, m), m);
        }
      }
      store_row(first, out + t * p.dq_stride.seq, D, 1.0f);
    }
  });
}

template <typename In>
void backward_typed(const AttentionBackwardParams& p, const Launch& launch) {
  switch (p.head_dim) {
    case 64: return backward_dim<In, 64>(p, launch);
    case 128: return backward_dim<In, 128>(p, launch);
    case 256: return backward_dim<In, 256>(p, launch);
    default: return backward_dim<In, 0>(p, launch);
  }
}

}  // namespace

// Entry points called by the dispatcher (attention_cpu.cpp), which has checked
// the dtype (F32 or BF16) and that this CPU supports the instruction set.
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

}  // namespace prism::kernels::cpu::PRISM_ISA_NS
