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
constexpr int kMR = 6;  // rows of a register tile
constexpr int kNV = 4;  // vectors per row of a register tile (64 floats)
static_assert(BQ % kLanes == 0 && BQ == 16 * kNV, "a query block is one register-tile row wide");

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
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
  switch (nv) {
    case 1: return micro_tile<MR, 1>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
    case 2: return micro_tile<MR, 2>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
    case 3: return micro_tile<MR, 3>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
    default: return micro_tile<MR, 4>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale, last);
  }
}

// C[M x N] = (accumulate ? diag(row_scale) C : 0) + A[M x K] B[K x N]; row_scale may be null (= 1).
inline void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                 int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale) {
  for (int64_t n0 = 0; n0 < N; n0 += kLanes * kNV) {
    const int64_t nn = imin(kLanes * kNV, N - n0);
    const int nv = static_cast<int>(ceil_div(nn, kLanes));
    const Mask last = tail_mask(nn - kLanes * (nv - 1));
    int64_t m0 = 0;
    auto at = [&](int64_t m) { return row_scale ? row_scale + m : nullptr; };
    for (; m0 + kMR <= M; m0 += kMR)
      tile_rows<kMR>(nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0), last);
    switch (M - m0) {
      case 0: break;
      case 1: tile_rows<1>(nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0), last); break;
      case 2: tile_rows<2>(nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0), last); break;
      case 3: tile_rows<3>(nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0), last); break;
      case 4: tile_rows<4>(nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0), last); break;
      default: tile_rows<5>(nv, K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, at(m0), last); break;
    }
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

  // fp32 rows of k or v: the input itself, or its converted copy for bf16.
  Rows rows(const void* x, const Strides& s, int64_t off, int64_t b, int64_t h, int64_t D) const {
    if (off >= 0) return {ws + off + (b * H + h) * T * D, D};
    return {slice<float>(x, s, b, h), s.seq};
  }
};

template <typename In, int kD>
void forward_item(const Forward<In>& f, int64_t b, int64_t h, int64_t qb, float* scratch) {
  const auto& p = f.p;
  const int64_t D = kD > 0 ? kD : p.head_dim, Dp = pad16(D), T = f.T;
  const int64_t q0 = qb * BQ, mq = imin(BQ, T - q0);
  float* qt = scratch;              // D x BQ: q tile transposed, in log2 units
  float* st = qt + pad16(D * BQ);   // BK x BQ: scores, then probabilities
  float* acc = st + BK * BQ;        // BQ x Dp: unnormalised output
  float* m = acc + BQ * Dp;         // running max (log2 units)
  float* l = m + BQ;                // running sum of exp2(s - m)
  float* dacc = l + BQ;             // running sum of exp2(s - m) * j
  float* alpha = dacc + BQ;         // rescale factor of this step
  const bool want_dist = p.distance != nullptr;

  const In* q = slice<In>(p.q, p.q_stride, b, h);
  const float c = p.scale * kLog2e;
  for (int64_t i = 0; i < BQ; ++i) {
    if (i < mq) {
      const In* qr = q + (q0 + i) * p.q_stride.seq;
      for (int64_t d = 0; d < D; ++d) qt[d * BQ + i] = to_float(qr[d]) * c;
    } else {
      for (int64_t d = 0; d < D; ++d) qt[d * BQ + i] = 0.0f;
    }
  }
  for (int64_t i = 0; i < BQ; i += kLanes) {
    vstore(m + i, vset(-kInf));
    vstore(l + i, vzero());
    vstore(dacc + i, vzero());
  }

  const Rows K = f.rows(p.k, p.k_stride, f.lay.k_f32, b, h, D), V = f.rows(p.v, p.v_stride, f.lay.v_f32, b, h, D);
  const int64_t kend = q0 + mq;  // causal: keys [0, kend) only; later tiles are fully masked
  for (int64_t k0 = 0; k0 < kend; k0 += BK) {
    const int64_t mk = imin(BK, kend - k0);
    gemm(mk, BQ, D, K.row(k0), K.ld, 1, qt, BQ, st, BQ, false, nullptr);
    const bool diag = k0 + mk - 1 > q0;  // some key of the tile is after some query
    for (int64_t iv = 0; iv < BQ; iv += kLanes) {
      float* s = st + iv;
      const Vec qi = viota(static_cast<float>(q0 + iv));
      const Vec m_old = vload(m + iv);
      Vec mx = m_old;
      if (diag) {
        for (int64_t j = 0; j < mk; ++j) {
          const Vec x = vkeep_between(vload(s + j * BQ), qi, static_cast<float>(k0 + j), kInf, -kInf);
          vstore(s + j * BQ, x);
          mx = vmax(mx, x);
        }
      } else {
        for (int64_t j = 0; j < mk; ++j) mx = vmax(mx, vload(s + j * BQ));
      }
      const Vec al = vexp2(m_old - mx);
      Vec ls = vzero(), ds = vzero();
      if (want_dist) {
        for (int64_t j = 0; j < mk; ++j) {
          const Vec pj = vexp2(vload(s + j * BQ) - mx);
          vstore(s + j * BQ, pj);
          ls = ls + pj;
          ds = vfmadd(pj, vset(static_cast<float>(k0 + j)), ds);
        }
        vstore(dacc + iv, vfmadd(vload(dacc + iv), al, ds));
      } else {
        for (int64_t j = 0; j < mk; ++j) {
          const Vec pj = vexp2(vload(s + j * BQ) - mx);
          vstore(s + j * BQ, pj);
          ls = ls + pj;
        }
      }
      vstore(m + iv, mx);
      vstore(l + iv, vfmadd(vload(l + iv), al, ls));
      vstore(alpha + iv, al);
    }
    // acc = diag(alpha) acc + P V, with P read from the transposed tile.
    gemm(mq, D, mk, st, 1, BQ, V.row(k0), V.ld, acc, Dp, k0 > 0, alpha);
  }

  In* o = slice<In>(p.o, p.o_stride, b, h);
  float* lse = p.lse + (b * f.H + h) * T;
  for (int64_t i = 0; i < mq; ++i) {
    const float inv = 1.0f / l[i];
    store_row(acc + i * Dp, o + (q0 + i) * p.o_stride.seq, D, inv);
    lse[q0 + i] = (m[i] + std::log2(l[i])) * kLn2;
    if (want_dist) p.distance[(b * f.H + h) * T + q0 + i] = static_cast<float>(q0 + i) - dacc[i] * inv;
  }
}

template <typename In, int kD>
void forward_dim(const AttentionForwardParams& p, const Launch& launch) {
  const int threads = launch.num_threads > 0 ? launch.num_threads : 1;
  Forward<In> f{p, forward_layout(p, threads), static_cast<float*>(launch.workspace), p.batch, p.heads, p.seq_len,
                ceil_div(p.seq_len, BQ)};
  const int64_t D = p.head_dim, nkb = ceil_div(f.T, BK);
  if constexpr (sizeof(In) == 2) {
    // bf16: fp32 copies of k and v, converted once instead of once per query block.
    parallel_items(f.B * f.H * nkb, threads, [&](int64_t it, int) {
      const int64_t bh = it / nkb, b = bh / f.H, h = bh % f.H, k0 = (it % nkb) * BK, mk = imin(BK, f.T - k0);
      const In* k = slice<In>(p.k, p.k_stride, b, h);
      const In* v = slice<In>(p.v, p.v_stride, b, h);
      float* kf = f.ws + f.lay.k_f32 + bh * f.T * D;
      float* vf = f.ws + f.lay.v_f32 + bh * f.T * D;
      for (int64_t t = k0; t < k0 + mk; ++t) {
        convert_row(k + t * p.k_stride.seq, kf + t * D, D);
        convert_row(v + t * p.v_stride.seq, vf + t * D, D);
      }
    });
  }
  // Largest query blocks (most keys) first, so the dynamic schedule ends evenly.
  parallel_items(f.B * f.H * f.nqb, threads, [&](int64_t it, int tid) {
    const int64_t qb = f.nqb - 1 - it / (f.B * f.H), bh = it % (f.B * f.H);
    forward_item<In, kD>(f, bh / f.H, bh % f.H, qb, f.ws + f.lay.scratch + tid * f.lay.scratch_per_thread);
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

  Rows rows(const void* x, const Strides& s, int64_t off, int64_t b, int64_t h) const {
    if (off >= 0) return {ws + off + (b * H + h) * T * p.head_dim, p.head_dim};
    return {slice<float>(x, s, b, h), s.seq};
  }
  float* q_packed(int64_t b, int64_t h, int64_t qb) const {
    return ws + lay.q_packed + ((b * H + h) * nqb + qb) * p.head_dim * BQ;
  }
  float* dout_packed(int64_t b, int64_t h, int64_t qb) const {
    return ws + lay.dout_packed + ((b * H + h) * nqb + qb) * p.head_dim * BQ;
  }
  float* delta(int64_t b, int64_t h) const { return (p.delta ? p.delta : ws + lay.delta) + (b * H + h) * T; }
  // Where split s accumulates dq (unscaled units folded in already).
  MutRows dq_sum(int64_t b, int64_t h, int64_t s) const {
    if (lay.dq_direct) return {slice<float>(p.dq, p.dq_stride, b, h), p.dq_stride.seq};
    return {ws + lay.dq_partial + (s * B * H + b * H + h) * T * p.head_dim, p.head_dim};
  }
};

// Per (b, h, query block): fp32 copies (bf16), transposed q and dout tiles,
// delta = rowsum(dout * o), and zeroed dq sums.
template <typename In>
void backward_prepare(const Backward<In>& f, int64_t b, int64_t h, int64_t qb) {
  const auto& p = f.p;
  const int64_t D = p.head_dim, T = f.T, q0 = qb * BQ, mq = imin(BQ, T - q0);
  if constexpr (sizeof(In) == 2) {
    const void* src[4] = {p.q, p.k, p.v, p.dout};
    const Strides* st[4] = {&p.q_stride, &p.k_stride, &p.v_stride, &p.dout_stride};
    const int64_t off[4] = {f.lay.q_f32, f.lay.k_f32, f.lay.v_f32, f.lay.dout_f32};
    for (int x = 0; x < 4; ++x) {
      const In* s = slice<In>(src[x], *st[x], b, h);
      float* d = f.ws + off[x] + (b * f.H + h) * T * D;
      for (int64_t t = q0; t < q0 + mq; ++t) convert_row(s + t * st[x]->seq, d + t * D, D);
    }
  }
  const Rows Q = f.rows(p.q, p.q_stride, f.lay.q_f32, b, h), dO = f.rows(p.dout, p.dout_stride, f.lay.dout_f32, b, h);
  float* qt = f.q_packed(b, h, qb);
  float* dot = f.dout_packed(b, h, qb);
  const float c = p.scale * kLog2e;
  for (int64_t i = 0; i < BQ; ++i) {
    if (i < mq) {
      const float* qr = Q.row(q0 + i);
      const float* gr = dO.row(q0 + i);
      for (int64_t d = 0; d < D; ++d) {
        qt[d * BQ + i] = qr[d] * c;
        dot[d * BQ + i] = gr[d];
      }
    } else {
      for (int64_t d = 0; d < D; ++d) qt[d * BQ + i] = dot[d * BQ + i] = 0.0f;
    }
  }
  const In* o = slice<In>(p.o, p.o_stride, b, h);
  float* delta = f.delta(b, h);
  for (int64_t t = q0; t < q0 + mq; ++t) {
    Vec s = vzero();
    const float* gr = dO.row(t);
    const In* orow = o + t * p.o_stride.seq;
    for (int64_t d = 0; d < D; d += kLanes) {
      const Mask m = tail_mask(D - d);
      s = vfmadd(vload(gr + d, m), vload_in(orow + d, m), s);
    }
    delta[t] = vsum(s);
  }
  for (int64_t s = 0; s < f.lay.nsplit; ++s) {
    const MutRows dq = f.dq_sum(b, h, s);
    for (int64_t t = q0; t < q0 + mq; ++t) zero_row(dq.row(t), D);
  }
}

// One (b, h) and one split of its key blocks: dK, dV per key block, dQ summed.
template <typename In, int kD>
void backward_item(const Backward<In>& f, int64_t b, int64_t h, int64_t split, float* scratch) {
  const auto& p = f.p;
  const int64_t D = kD > 0 ? kD : p.head_dim, Dp = pad16(D), T = f.T;
  float* pt = scratch;           // BK x BQ: probabilities, transposed
  float* dst = pt + BK * BQ;     // BK x BQ: dP, then dS (scaled), transposed
  float* dk = dst + BK * BQ;     // BK x Dp
  float* dv = dk + BK * Dp;      // BK x Dp
  const Rows Q = f.rows(p.q, p.q_stride, f.lay.q_f32, b, h), K = f.rows(p.k, p.k_stride, f.lay.k_f32, b, h),
             V = f.rows(p.v, p.v_stride, f.lay.v_f32, b, h), dO = f.rows(p.dout, p.dout_stride, f.lay.dout_f32, b, h);
  const MutRows dq = f.dq_sum(b, h, split);
  const float* lse = p.lse + (b * f.H + h) * T;
  const float* delta = f.delta(b, h);
  In* dk_out = slice<In>(p.dk, p.dk_stride, b, h);
  In* dv_out = slice<In>(p.dv, p.dv_stride, b, h);

  for (int64_t kb = split; kb < f.nkb; kb += f.lay.nsplit) {
    const int64_t k0 = kb * BK, mk = imin(BK, T - k0);
    // Query blocks before k0 / BQ see none of these keys: skipped.
    for (int64_t qb = k0 / BQ; qb < f.nqb; ++qb) {
      const int64_t q0 = qb * BQ, mq = imin(BQ, T - q0);
      gemm(mk, BQ, D, K.row(k0), K.ld, 1, f.q_packed(b, h, qb), BQ, pt, BQ, false, nullptr);
      gemm(mk, BQ, D, V.row(k0), V.ld, 1, f.dout_packed(b, h, qb), BQ, dst, BQ, false, nullptr);
      const bool edge = k0 + mk - 1 > q0 || mq < BQ;  // causal mask or rows past T inside the tile
      const Vec scale = vset(p.scale);
      for (int64_t iv = 0; iv < BQ; iv += kLanes) {
        const Mask mv = tail_mask(mq - iv);
        const Vec lse2 = vload(lse + q0 + iv, mv) * vset(kLog2e);
        const Vec dl = vload(delta + q0 + iv, mv);
        const Vec qi = viota(static_cast<float>(q0 + iv));
        for (int64_t j = 0; j < mk; ++j) {
          Vec pj = vexp2(vload(pt + j * BQ + iv) - lse2);
          if (edge) pj = vkeep_between(pj, qi, static_cast<float>(k0 + j), static_cast<float>(T - 1), 0.0f);
          vstore(pt + j * BQ + iv, pj);
          vstore(dst + j * BQ + iv, pj * (vload(dst + j * BQ + iv) - dl) * scale);
        }
      }
      const bool acc = qb > k0 / BQ;
      gemm(mk, D, mq, pt, BQ, 1, dO.row(q0), dO.ld, dv, Dp, acc, nullptr);   // dV += P^T dO
      gemm(mk, D, mq, dst, BQ, 1, Q.row(q0), Q.ld, dk, Dp, acc, nullptr);    // dK += dS^T Q
      gemm(mq, D, mk, dst, 1, BQ, K.row(k0), K.ld, dq.row(q0), dq.ld, true, nullptr);  // dQ += dS K
    }
    for (int64_t j = 0; j < mk; ++j) {
      store_row(dk + j * Dp, dk_out + (k0 + j) * p.dk_stride.seq, D, 1.0f);
      store_row(dv + j * Dp, dv_out + (k0 + j) * p.dv_stride.seq, D, 1.0f);
    }
  }
}

template <typename In, int kD>
void backward_dim(const AttentionBackwardParams& p, const Launch& launch) {
  const int threads = launch.num_threads > 0 ? launch.num_threads : 1;
  Backward<In> f{p, backward_layout(p, threads), static_cast<float*>(launch.workspace), p.batch, p.heads, p.seq_len,
                 ceil_div(p.seq_len, BQ), ceil_div(p.seq_len, BK)};
  const int64_t BH = f.B * f.H, D = p.head_dim;
  parallel_items(BH * f.nqb, threads, [&](int64_t it, int) {
    const int64_t bh = it / f.nqb;
    backward_prepare(f, bh / f.H, bh % f.H, it % f.nqb);
  });
  parallel_items(BH * f.lay.nsplit, threads, [&](int64_t it, int tid) {
    const int64_t bh = it / f.lay.nsplit;
    backward_item<In, kD>(f, bh / f.H, bh % f.H, it % f.lay.nsplit,
                          f.ws + f.lay.scratch + tid * f.lay.scratch_per_thread);
  });
  if (f.lay.dq_direct) return;
  // Sum the splits' partial dq into the output (and convert to its dtype).
  parallel_items(BH * f.nqb, threads, [&](int64_t it, int) {
    const int64_t bh = it / f.nqb, b = bh / f.H, h = bh % f.H, q0 = (it % f.nqb) * BQ, mq = imin(BQ, f.T - q0);
    In* out = slice<In>(p.dq, p.dq_stride, b, h);
    for (int64_t t = q0; t < q0 + mq; ++t) {
      float* first = f.dq_sum(b, h, 0).row(t);
      for (int64_t s = 1; s < f.lay.nsplit; ++s) {
        const float* other = f.dq_sum(b, h, s).row(t);
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
