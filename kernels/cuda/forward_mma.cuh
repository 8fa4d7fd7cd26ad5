#pragma once
// Causal attention forward on the tensor cores (bf16/fp16 in, fp32 accumulate).
//
// One CTA owns kBlockM query rows of one (batch, head); each warp owns 16 of
// them. Key/value tiles of kBlockN rows stream through shared memory (cp.async:
// V_n loads while S = Q K_n^T and the softmax run, K_{n+1} while O += P V_n).
// Online softmax in the exp2 domain; tiles past the diagonal are never visited,
// and only tiles that cross it are masked. Per row it keeps m (running max),
// l (sum of p) and, for the distance telemetry, sum_j p_ij (i - j): accumulated as
// it is, since i - sum_j p_ij j / l cancels catastrophically for a local head at large i.
#include "common.cuh"

namespace prism::kernels::cuda {

template <int D>
struct ForwardConfig {
  static constexpr int kBlockM = D <= 128 ? 128 : 64;
  static constexpr int kBlockN = D <= 128 ? 64 : 32;
  static constexpr int kWarps = kBlockM / 16;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kLd = D + 8;  // smem row stride (elements): +16 bytes keeps ldmatrix conflict-free
  static constexpr int kNF = kBlockN / 8;   // S fragments per warp
  static constexpr int kDF = D / 8;         // O fragments per warp
  template <typename T>
  static constexpr size_t smem_bytes() { return static_cast<size_t>(kBlockM + 2 * kBlockN) * kLd * sizeof(T); }
};

template <typename T, int D, bool kDistance>
__global__ void __launch_bounds__(ForwardConfig<D>::kThreads)
    forward_mma_kernel(const AttentionForwardParams p) {
  using Cfg = ForwardConfig<D>;
  using Tr = ElemTraits<T>;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kLd = Cfg::kLd;
  constexpr int kNF = Cfg::kNF, kDF = Cfg::kDF;

  PRISM_DYNAMIC_SMEM(smem_raw);
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * kLd;
  T* sV = sK + kBlockN * kLd;

  const int T_len = static_cast<int>(p.seq_len);
  // Longest rows first: the last query block has the most key tiles.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t bh = b * p.heads + h;
  const int m_start = m_block * kBlockM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q4 = lane & 3;

  const T* q = row_ptr(static_cast<const T*>(p.q), p.q_stride, b, 0, h);
  const T* k = row_ptr(static_cast<const T*>(p.k), p.k_stride, b, 0, h);
  const T* v = row_ptr(static_cast<const T*>(p.v), p.v_stride, b, 0, h);

  // Key tiles 0..n_last: the last one holds key min(m_end, T) - 1.
  const int m_last_row = min(m_start + kBlockM, T_len) - 1;
  const int n_last = m_last_row / kBlockN;

  load_tile_async<D, Cfg::kThreads>(sQ, kLd, q, p.q_stride.seq, m_start, kBlockM, T_len);
  load_tile_async<D, Cfg::kThreads>(sK, kLd, k, p.k_stride.seq, 0, kBlockN, T_len);
  cp_async_commit();

  float acc_o[kDF][4];
  zero(acc_o);
  // Row state for this thread's two rows (g and g + 8 of the warp's 16).
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.f, 0.f}, row_ld[2] = {0.f, 0.f};
  const int row0 = m_start + warp * 16 + g;  // global query index of row 0; row 1 is row0 + 8
  const float scale_log2 = p.scale * kLog2e;

  for (int n_block = 0; n_block <= n_last; ++n_block) {
    const int n_start = n_block * kBlockN;
    cp_async_wait_all();
    __syncthreads();  // K_n (and Q) landed; every warp is done with V_{n-1}
    load_tile_async<D, Cfg::kThreads>(sV, kLd, v, p.v_stride.seq, n_start, kBlockN, T_len);
    cp_async_commit();

    float s[kNF][4];
    zero(s);
    warp_gemm<T, D, kNF, false, false>(s, sQ, kLd, warp * 16, sK, kLd, 0);

    // Scale to the log2 domain; mask keys after the query on tiles that cross the diagonal.
    const bool crosses = n_start + kBlockN - 1 > m_start + warp * 16;
#pragma unroll
    for (int nf = 0; nf < kNF; ++nf)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + (e >= 2 ? 8 : 0);
        const int col = n_start + nf * 8 + 2 * q4 + (e & 1);
        s[nf][e] = (crosses && col > row) ? -INFINITY : s[nf][e] * scale_log2;
      }

    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nf = 0; nf < kNF; ++nf) mx = fmaxf(mx, fmaxf(s[nf][2 * r], s[nf][2 * r + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(row_m[r], mx);
      // Tile 0 always holds key 0 <= row, so m_new is finite; guard anyway.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      alpha[r] = exp2f(row_m[r] - m_use);
      row_m[r] = m_new;
      float sum = 0.f, sum_d = 0.f;
      const int row = row0 + 8 * r;
#pragma unroll
      for (int nf = 0; nf < kNF; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = exp2f(s[nf][2 * r + e] - m_use);
          s[nf][2 * r + e] = pv;
          sum += pv;
          // Masked keys (col > row) have pv = 0.
          if constexpr (kDistance) sum_d += pv * static_cast<float>(row - (n_start + nf * 8 + 2 * q4 + e));
        }
      // Partial sums per lane; the quad is reduced once at the end (alpha is the same on all four).
      row_l[r] = row_l[r] * alpha[r] + sum;
      if constexpr (kDistance) row_ld[r] = row_ld[r] * alpha[r] + sum_d;
    }
#pragma unroll
    for (int df = 0; df < kDF; ++df) {
      acc_o[df][0] *= alpha[0];
      acc_o[df][1] *= alpha[0];
      acc_o[df][2] *= alpha[1];
      acc_o[df][3] *= alpha[1];
    }

    cp_async_wait_all();
    __syncthreads();  // V_n landed; every warp is done with K_n
    if (n_block < n_last) {
      load_tile_async<D, Cfg::kThreads>(sK, kLd, k, p.k_stride.seq, n_start + kBlockN, kBlockN, T_len);
      cp_async_commit();
    }

    // O += P V: the C fragments of S for key columns [16j, 16j+16) are the A fragment of P.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[4];
      a[0] = Tr::pack(s[2 * kk][0], s[2 * kk][1]);
      a[1] = Tr::pack(s[2 * kk][2], s[2 * kk][3]);
      a[2] = Tr::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = Tr::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int df = 0; df < kDF; df += 2) {
        uint32_t bv[4];
        load_b_pair_trans(bv, sV, kLd, df * 8, kk * 16);
        Mma<T>::run(acc_o[df], a, bv[0], bv[1]);
        Mma<T>::run(acc_o[df + 1], a, bv[2], bv[3]);
      }
    }
  }

  // Finish the rows: O / l, lse = ln(sum exp(scale * s)), distance = sum_j p_ij (i - j) / l.
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(row_l[r]);
    inv_l[r] = l > 0.f ? 1.f / l : 0.f;
    const int row = row0 + 8 * r;
    float ld = 0.f;
    if constexpr (kDistance) ld = quad_sum(row_ld[r]);
    if (q4 == 0 && row < T_len) {
      const int64_t idx = bh * T_len + row;
      p.lse[idx] = row_m[r] * kLn2 + logf(l);
      if constexpr (kDistance) p.distance[idx] = ld * inv_l[r];
    }
  }

  // Stage O through this warp's own rows of sQ, then store 16-byte rows.
  __syncthreads();  // every warp is done reading sQ/sV
  T* sO = sQ;
#pragma unroll
  for (int df = 0; df < kDF; ++df) {
    const int col = df * 8 + 2 * q4;
    *reinterpret_cast<uint32_t*>(&sO[(warp * 16 + g) * kLd + col]) =
        Tr::pack(acc_o[df][0] * inv_l[0], acc_o[df][1] * inv_l[0]);
    *reinterpret_cast<uint32_t*>(&sO[(warp * 16 + g + 8) * kLd + col]) =
        Tr::pack(acc_o[df][2] * inv_l[1], acc_o[df][3] * inv_l[1]);
  }
  __syncthreads();
  T* o = row_ptr(static_cast<T*>(p.o), p.o_stride, b, 0, h);
  constexpr int kChunks = D * sizeof(T) / 16;
  for (int i = threadIdx.x; i < kBlockM * kChunks; i += Cfg::kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = m_start + r;
    if (row < T_len)
      *reinterpret_cast<uint4*>(o + static_cast<int64_t>(row) * p.o_stride.seq + c * 8) =
          *reinterpret_cast<const uint4*>(&sO[r * kLd + c * 8]);
  }
}

// One CTA per kBlockM query rows of one (batch, head).
template <typename T, int D>
inline LaunchShape forward_mma_shape(const AttentionForwardParams& p) {
  using Cfg = ForwardConfig<D>;
  return {dim3(static_cast<unsigned>((p.seq_len + Cfg::kBlockM - 1) / Cfg::kBlockM), static_cast<unsigned>(p.heads),
               static_cast<unsigned>(p.batch)),
          dim3(Cfg::kThreads), Cfg::template smem_bytes<T>()};
}

#ifndef PRISM_CUDA_EMULATION
template <typename T, int D>
void launch_forward_mma(const AttentionForwardParams& p) {
  const LaunchShape shape = forward_mma_shape<T, D>(p);
  if (p.distance) launch(forward_mma_kernel<T, D, true>, shape, p, "attention forward (tensor cores)");
  else launch(forward_mma_kernel<T, D, false>, shape, p, "attention forward (tensor cores)");
}
#endif

}  // namespace prism::kernels::cuda
