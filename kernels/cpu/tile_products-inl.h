// Register-tiled matrix products on one instruction set, for the fused
// attention kernel: C[M x N] (+)= A[M x K] B[K x N] with A read through
// arbitrary strides (so transposed tiles cost nothing), and, on the AVX-512
// BF16 build, the same product on bf16 pairs with vdpbf16ps.
//
// Included only by attention_kernel-inl.h, once per instruction set, inside
// its namespaces (HWY_BEFORE_NAMESPACE, PRISM_KERNEL_NS::HWY_NAMESPACE): no
// include guard and no includes of its own, on purpose.

namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes: a 64-wide query block is then a whole number of vectors
// for every vector length the dispatcher accepts (4, 8 or 16 floats).
using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;

// Register tile: kMR rows of C by kNV vectors. 16-register targets keep 12
// accumulators, 2 B vectors and a broadcast in registers; 32-register targets
// (AVX-512, NEON, SVE) 24 + 4 + 1.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
constexpr int kMR = 6;
constexpr int kNV = 2;
#elif HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
constexpr int kMR = 2;
constexpr int kNV = 1;
#else
constexpr int kMR = 6;
constexpr int kNV = 4;
#endif

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t pad16(int64_t n) { return ceil_div(n, 16) * 16; }

// Vectors cannot live in arrays on SVE (sizeless types), so a register tile
// is named accumulators passed by reference to these two row helpers.
template <int NV>
HWY_INLINE void fma_row(VF a, VF b0, VF b1, VF b2, VF b3, VF& c0, VF& c1, VF& c2, VF& c3) {
  c0 = hn::MulAdd(a, b0, c0);
  if constexpr (NV > 1) c1 = hn::MulAdd(a, b1, c1);
  if constexpr (NV > 2) c2 = hn::MulAdd(a, b2, c2);
  if constexpr (NV > 3) c3 = hn::MulAdd(a, b3, c3);
}

// Stores row c = (accumulate ? s c : 0) + acc.
template <int NV>
HWY_INLINE void finish_row(float* HWY_RESTRICT c, bool accumulate, float s, VF c0, VF c1, VF c2, VF c3) {
  const DF df;
  const size_t N = hn::Lanes(df);
  if (accumulate) {
    const VF sv = hn::Set(df, s);
    c0 = hn::MulAdd(hn::LoadU(df, c), sv, c0);
    if constexpr (NV > 1) c1 = hn::MulAdd(hn::LoadU(df, c + N), sv, c1);
    if constexpr (NV > 2) c2 = hn::MulAdd(hn::LoadU(df, c + 2 * N), sv, c2);
    if constexpr (NV > 3) c3 = hn::MulAdd(hn::LoadU(df, c + 3 * N), sv, c3);
  }
  hn::StoreU(c0, df, c);
  if constexpr (NV > 1) hn::StoreU(c1, df, c + N);
  if constexpr (NV > 2) hn::StoreU(c2, df, c + 2 * N);
  if constexpr (NV > 3) hn::StoreU(c3, df, c + 3 * N);
}

// One register tile: C[MR x NV vectors] = (accumulate ? diag(row_scale) C : 0)
// + A B, A(r, k) = a[r a_rs + k a_cs], B row k = b + k ldb.
template <int MR, int NV>
HWY_INLINE void micro_tile(int64_t K, const float* HWY_RESTRICT a, int64_t a_rs, int64_t a_cs,
                           const float* HWY_RESTRICT b, int64_t ldb, float* HWY_RESTRICT c, int64_t ldc,
                           bool accumulate, const float* row_scale) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF z = hn::Zero(df);
  VF c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z, c20 = z, c21 = z, c22 = z, c23 = z;
  VF c30 = z, c31 = z, c32 = z, c33 = z, c40 = z, c41 = z, c42 = z, c43 = z, c50 = z, c51 = z, c52 = z, c53 = z;
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    const VF b0 = hn::LoadU(df, bk);
    const VF b1 = NV > 1 ? hn::LoadU(df, bk + N) : z;
    const VF b2 = NV > 2 ? hn::LoadU(df, bk + 2 * N) : z;
    const VF b3 = NV > 3 ? hn::LoadU(df, bk + 3 * N) : z;
    const float* ak = a + k * a_cs;
    fma_row<NV>(hn::Set(df, ak[0]), b0, b1, b2, b3, c00, c01, c02, c03);
    if constexpr (MR > 1) fma_row<NV>(hn::Set(df, ak[a_rs]), b0, b1, b2, b3, c10, c11, c12, c13);
    if constexpr (MR > 2) fma_row<NV>(hn::Set(df, ak[2 * a_rs]), b0, b1, b2, b3, c20, c21, c22, c23);
    if constexpr (MR > 3) fma_row<NV>(hn::Set(df, ak[3 * a_rs]), b0, b1, b2, b3, c30, c31, c32, c33);
    if constexpr (MR > 4) fma_row<NV>(hn::Set(df, ak[4 * a_rs]), b0, b1, b2, b3, c40, c41, c42, c43);
    if constexpr (MR > 5) fma_row<NV>(hn::Set(df, ak[5 * a_rs]), b0, b1, b2, b3, c50, c51, c52, c53);
  }
  auto s = [&](int r) { return row_scale ? row_scale[r] : 1.0f; };
  finish_row<NV>(c, accumulate, s(0), c00, c01, c02, c03);
  if constexpr (MR > 1) finish_row<NV>(c + ldc, accumulate, s(1), c10, c11, c12, c13);
  if constexpr (MR > 2) finish_row<NV>(c + 2 * ldc, accumulate, s(2), c20, c21, c22, c23);
  if constexpr (MR > 3) finish_row<NV>(c + 3 * ldc, accumulate, s(3), c30, c31, c32, c33);
  if constexpr (MR > 4) finish_row<NV>(c + 4 * ldc, accumulate, s(4), c40, c41, c42, c43);
  if constexpr (MR > 5) finish_row<NV>(c + 5 * ldc, accumulate, s(5), c50, c51, c52, c53);
}

template <int MR>
HWY_INLINE void tile_rows(int nv, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                          float* c, int64_t ldc, bool accumulate, const float* row_scale) {
  if constexpr (kNV == 1) {
    (void)nv;
    micro_tile<MR, 1>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
  } else if constexpr (kNV == 2) {
    if (nv == 1) return micro_tile<MR, 1>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
    micro_tile<MR, 2>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
  } else {
    switch (nv) {
      case 1: return micro_tile<MR, 1>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
      case 2: return micro_tile<MR, 2>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
      case 3: return micro_tile<MR, 3>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
      default: return micro_tile<MR, 4>(K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
    }
  }
}

// A register tile of exactly `rows` (< kMR) rows.
template <int R = kMR - 1>
HWY_INLINE void tail_rows(int64_t rows, int nv, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
                          const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                          const float* row_scale) {
  if constexpr (R >= 1) {
    if (rows == R) return tile_rows<R>(nv, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
    tail_rows<R - 1>(rows, nv, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, row_scale);
  }
}

// Rows of B per pass: a 64-row panel of them stays in L1 while every
// register tile of A streams past it.
constexpr int64_t kKc = 64;

// C[M x N] = (accumulate ? diag(row_scale) C : 0) + A[M x K] B[K x N];
// row_scale may be null (= 1). Columns go in whole vectors: the rows of B and
// C must be readable (and C's writable) up to N rounded up to 16; columns past
// N receive values nobody reads.
inline void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                 int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(DF()));
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kc = imin(kKc, K - k0);
    const bool acc = k0 > 0 || accumulate;
    const float* rs = k0 > 0 ? nullptr : row_scale;
    const float* ak = a + k0 * a_cs;
    const float* bk = b + k0 * ldb;
    for (int64_t n0 = 0; n0 < N; n0 += lanes * kNV) {
      const int nv = static_cast<int>(ceil_div(imin(lanes * kNV, N - n0), lanes));
      int64_t m0 = 0;
      for (; m0 + kMR <= M; m0 += kMR)
        tile_rows<kMR>(nv, kc, ak + m0 * a_rs, a_rs, a_cs, bk + n0, ldb, c + m0 * ldc + n0, ldc, acc,
                       rs ? rs + m0 : nullptr);
      if (m0 < M)
        tail_rows(M - m0, nv, kc, ak + m0 * a_rs, a_rs, a_cs, bk + n0, ldb, c + m0 * ldc + n0, ldc, acc,
                  rs ? rs + m0 : nullptr);
    }
  }
}

#if PRISM_PAIRS
// The bf16 path multiplies with the AVX512-BF16 pair dot product: exact
// products of two bf16 pairs summed into fp32, twice the work per instruction
// of an fp32 FMA. Operands are "pair-packed" along the contraction: A's pair
// (r, k) is two adjacent bf16 at a + r a_rs + k a_ps; B's pair row k holds, for
// column n, the pair (x[2k][n], x[2k + 1][n]) at b + k ldb + 2n. Highway 1.0
// has no bf16 dot product target, so this is the one place with intrinsics.
template <int MR, int NV>
HWY_INLINE void pair_micro(int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps, const uint16_t* b,
                           int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < pairs; ++k) {
    const uint16_t* bk = b + k * ldb;
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bk + 32 * v);
    for (int r = 0; r < MR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, a + r * a_rs + k * a_ps, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      const __m512 s = _mm512_set1_ps(row_scale ? row_scale[r] : 1.0f);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(_mm512_loadu_ps(cr + 16 * v), s, acc[r][v]);
    }
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(cr + 16 * v, acc[r][v]);
  }
}

template <int MR>
HWY_INLINE void pair_rows(int nv, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps, const uint16_t* b,
                          int64_t ldb, float* c, int64_t ldc, bool accumulate, const float* row_scale) {
  switch (nv) {
    case 1: return pair_micro<MR, 1>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
    case 2: return pair_micro<MR, 2>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
    case 3: return pair_micro<MR, 3>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
    default: return pair_micro<MR, 4>(pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
  }
}

template <int R = kMR - 1>
HWY_INLINE void pair_tail_rows(int64_t rows, int nv, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps,
                               const uint16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                               const float* row_scale) {
  if constexpr (R >= 1) {
    if (rows == R) return pair_rows<R>(nv, pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
    pair_tail_rows<R - 1>(rows, nv, pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
  }
}

// C[M x N] = (accumulate ? diag(row_scale) C : 0) + A B over `pairs` pairs of
// the contraction, on AVX512-BF16 dot products; blocked like gemm(), with the
// same whole-vector columns.
inline void pair_gemm_dot(int64_t M, int64_t N, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps,
                      const uint16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                      const float* row_scale) {
  for (int64_t p0 = 0; p0 < pairs; p0 += kKc) {
    const int64_t np = imin(kKc, pairs - p0);
    const bool acc = p0 > 0 || accumulate;
    const float* rs = p0 > 0 ? nullptr : row_scale;
    const uint16_t* ap = a + p0 * a_ps;
    const uint16_t* bp = b + p0 * ldb;
    for (int64_t n0 = 0; n0 < N; n0 += 16 * kNV) {
      const int nv = static_cast<int>(ceil_div(imin(16 * kNV, N - n0), 16));
      int64_t m0 = 0;
      for (; m0 + kMR <= M; m0 += kMR)
        pair_rows<kMR>(nv, np, ap + m0 * a_rs, a_rs, a_ps, bp + 2 * n0, ldb, c + m0 * ldc + n0, ldc, acc,
                       rs ? rs + m0 : nullptr);
      if (m0 < M)
        pair_tail_rows(M - m0, nv, np, ap + m0 * a_rs, a_rs, a_ps, bp + 2 * n0, ldb, c + m0 * ldc + n0, ldc, acc,
                       rs ? rs + m0 : nullptr);
    }
  }
}

#if PRISM_AMX
// The AMX build multiplies the same pair-packed operands on the tiles: B's
// pair rows are exactly TDPBF16PS's B layout (16 pair rows x 16 columns per
// tile). A tile is 16 rows of 16 adjacent pairs: where A's pairs are adjacent
// along its rows (a_ps == 2) the tiles load from A itself, ragged edges through
// a zero-padded copy; where they are not (P and dS pair-packed along their
// columns, a_rs == 2), A is first repacked, 32-bit pair by pair, into rows. One
// 16 x 16 fp32 C tile at a time accumulates over the contraction in chunks of
// 16 pairs; a ragged last chunk of B is zero-padded too, and the result is
// combined with C (row scale, accumulate) on the vector units. A contraction of
// fewer than 16 pairs (head dims below 32) would fill less than half a tile:
// it goes to the dot products instead (at head dim 8 the tiles took twice their
// time). Every call loads its tile configuration: other code on the thread
// (oneDNN in LibTorch's matmuls) may load its own between calls.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

inline void amx_configure() {
  AmxTileConfig cfg;
  for (int t = 0; t < 3; ++t) {
    cfg.colsb[t] = 64;  // C: 16 fp32; A: 32 bf16; B: 16 pairs of bf16
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

inline void pair_gemm(int64_t M, int64_t N, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps,
                      const uint16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                      const float* row_scale) {
  if (pairs < 16) {  // a contraction shorter than one tile (QK^T, dO V^T at head dims below 32)
    pair_gemm_dot(M, N, pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
    return;
  }
  amx_configure();
  thread_local std::vector<uint32_t> a_rows;  // A repacked as rows of pairs, when a_ps != 2
  int64_t a_row_pairs = 0;
  if (a_ps != 2) {
    a_row_pairs = pad16(pairs);
    a_rows.assign(static_cast<size_t>(pad16(M) * a_row_pairs), 0u);
    for (int64_t k = 0; k < pairs; ++k)
      for (int64_t r = 0; r < M; ++r) std::memcpy(&a_rows[r * a_row_pairs + k], a + r * a_rs + k * a_ps, 4);
  }
  alignas(64) uint16_t a_pad[16 * 32];
  alignas(64) uint16_t b_pad[16 * 32];
  alignas(64) float c_tile[16 * 16];
  for (int64_t m0 = 0; m0 < M; m0 += 16) {
    const int64_t mr = imin(16, M - m0);
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
      _tile_zero(0);
      for (int64_t k0 = 0; k0 < pairs; k0 += 16) {
        const int64_t kp = imin(16, pairs - k0);
        const uint16_t* at = a + m0 * a_rs + 2 * k0;
        int64_t a_stride = 2 * a_rs;  // bytes
        if (a_ps != 2) {
          at = reinterpret_cast<const uint16_t*>(a_rows.data() + m0 * a_row_pairs + k0);
          a_stride = 4 * a_row_pairs;
        } else if (mr < 16 || kp < 16) {
          std::memset(a_pad, 0, sizeof(a_pad));
          for (int64_t r = 0; r < mr; ++r) std::memcpy(a_pad + 32 * r, at + r * a_rs, 4 * kp);
          at = a_pad;
          a_stride = 64;
        }
        const uint16_t* bt = b + k0 * ldb + 2 * n0;
        int64_t b_stride = 2 * ldb;
        if (kp < 16) {
          std::memset(b_pad, 0, sizeof(b_pad));
          for (int64_t k = 0; k < kp; ++k) std::memcpy(b_pad + 32 * k, bt + k * ldb, 64);
          bt = b_pad;
          b_stride = 64;
        }
        _tile_loadd(1, at, a_stride);
        _tile_loadd(2, bt, b_stride);
        _tile_dpbf16ps(0, 1, 2);
      }
      _tile_stored(0, c_tile, 64);
      for (int64_t r = 0; r < mr; ++r) {
        float* cr = c + (m0 + r) * ldc + n0;
        __m512 v = _mm512_load_ps(c_tile + 16 * r);
        if (accumulate)
          v = _mm512_fmadd_ps(_mm512_loadu_ps(cr), _mm512_set1_ps(row_scale ? row_scale[m0 + r] : 1.0f), v);
        _mm512_storeu_ps(cr, v);
      }
    }
  }
}
#else
inline void pair_gemm(int64_t M, int64_t N, int64_t pairs, const uint16_t* a, int64_t a_rs, int64_t a_ps,
                      const uint16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                      const float* row_scale) {
  pair_gemm_dot(M, N, pairs, a, a_rs, a_ps, b, ldb, c, ldc, accumulate, row_scale);
}
#endif  // PRISM_AMX

inline __mmask16 lanes16(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}
// [a0 .. a15 | b0 .. b15] (bf16) -> [a0 b0 a1 b1 .. a15 b15]
inline __m512i interleave_halves(__m512i x) {
  alignas(64) static const uint16_t idx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                               8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(idx), x);
}
// Pairs (lo[n], hi[n]) of two fp32 rows, rounded to bf16.
inline void store_pairs(uint16_t* dst, VF lo, VF hi) {
  const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi.raw, lo.raw);  // low half: lo
  _mm512_storeu_si512(dst, interleave_halves(h));
}
// 16 pairs (r0[n], r1[n]) of two bf16 rows, zero outside the lanes in m; r1
// may be null (zeros). The masked loads never touch memory outside m.
inline void store_pairs(uint16_t* dst, const uint16_t* r0, const uint16_t* r1, __mmask16 m) {
  const __m256i x = _mm256_maskz_loadu_epi16(m, r0);
  const __m256i y = r1 ? _mm256_maskz_loadu_epi16(m, r1) : _mm256_setzero_si256();
  _mm512_storeu_si512(dst, interleave_halves(_mm512_inserti64x4(_mm512_castsi256_si512(x), y, 1)));
}
// Pair-packs rows [t0, t0 + n) of a bf16 slice along the rows, for pair_gemm's
// B: pair row k of `out` (ld = out_ld) pairs rows t0 + 2k and t0 + 2k + 1;
// rows at or past n count as zeros, and so do the columns from D to pad16(D).
inline void pair_pack_rows(const uint16_t* x, int64_t ld, int64_t t0, int64_t n, int64_t D, uint16_t* out,
                           int64_t out_ld) {
  for (int64_t k = 0; 2 * k < n; ++k) {
    const uint16_t* r0 = x + (t0 + 2 * k) * ld;
    const uint16_t* r1 = 2 * k + 1 < n ? r0 + ld : nullptr;
    for (int64_t d = 0; d < pad16(D); d += 16)
      store_pairs(out + k * out_ld + 2 * d, r0 + d, r1 ? r1 + d : nullptr, lanes16(D - d));
  }
}
#endif  // PRISM_PAIRS
