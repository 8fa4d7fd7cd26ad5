#pragma once
// Causal attention backward on the tensor cores (bf16/fp16 in, fp32 accumulate).
//
// One CTA owns kBlockN keys of one (batch, head) and keeps their dK, dV in
// registers. It walks the query blocks from the diagonal down and recomputes
// P = exp(scale * Q K^T - lse) from the saved log-sum-exp (no T x T buffer):
//   phase 1  S = Q K^T, dP = dO V^T -> P, dS = P * (dP - delta)   (to smem, 16-bit)
//   phase 2  dV += P^T dO, dK += dS^T Q                            (registers)
//   phase 3  dQ += scale * dS K                                   (fp32 atomics into dq_accum)
// delta = rowsum(dO * O) comes from a preprocessing kernel; a last kernel
// converts dq_accum to dq's dtype and strides.
#include "common.cuh"

namespace prism::kernels::cuda {

template <int D>
struct BackwardConfig {
  static constexpr int kBlockM = 64;               // queries per step
  static constexpr int kBlockN = D <= 128 ? 64 : 32;  // keys per CTA
  static constexpr int kWarps = D <= 64 ? 4 : 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kLd = D + 8;
  static constexpr int kLdS = kBlockN + 8;
  // Warp grids: phase 1 tiles M x N, phase 2 tiles N x D, phase 3 tiles M x D.
  static constexpr int kWM1 = kBlockM / 16, kWN1 = kWarps / kWM1, kNF1 = kBlockN / kWN1 / 8;
  static constexpr int kWM2 = kBlockN / 16, kWN2 = kWarps / kWM2, kDF2 = D / kWN2 / 8;
  static constexpr int kWM3 = kBlockM / 16, kWN3 = kWarps / kWM3, kCols3 = D / kWN3;
  static constexpr int kDQChunk = kCols3 % 32 == 0 ? 32 : 16;  // dQ columns per accumulator pass
  static_assert(kWN1 >= 1 && kWN2 >= 1 && kWN3 >= 1, "too few warps for the tile");
  static_assert(kNF1 % 2 == 0 && kDF2 % 2 == 0 && kCols3 % 16 == 0, "fragments come in pairs");
  template <typename T>
  static constexpr size_t smem_bytes() {
    return (static_cast<size_t>(2 * kBlockM + 2 * kBlockN) * kLd + 2 * kBlockM * kLdS) * sizeof(T) +
           2 * kBlockM * sizeof(float);
  }
};

template <typename T, int D>
__global__ void __launch_bounds__(BackwardConfig<D>::kThreads)
    backward_mma_kernel(const AttentionBackwardParams p) {
  using Cfg = BackwardConfig<D>;
  using Tr = ElemTraits<T>;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kLd = Cfg::kLd, kLdS = Cfg::kLdS;

  PRISM_DYNAMIC_SMEM(smem_raw);
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + kBlockM * kLd;
  T* sK = sdO + kBlockM * kLd;
  T* sV = sK + kBlockN * kLd;
  T* sP = sV + kBlockN * kLd;
  T* sdS = sP + kBlockM * kLdS;
  float* sLse = reinterpret_cast<float*>(sdS + kBlockM * kLdS);
  float* sDelta = sLse + kBlockM;

  const int T_len = static_cast<int>(p.seq_len);
  const int n_block = blockIdx.x;  // block 0 (the most query blocks) launches first
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t bh = b * p.heads + h;
  const int n_start = n_block * kBlockN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q4 = lane & 3;
  const float scale_log2 = p.scale * kLog2e;

  const T* q = row_ptr(static_cast<const T*>(p.q), p.q_stride, b, 0, h);
  const T* k = row_ptr(static_cast<const T*>(p.k), p.k_stride, b, 0, h);
  const T* v = row_ptr(static_cast<const T*>(p.v), p.v_stride, b, 0, h);
  const T* dout = row_ptr(static_cast<const T*>(p.dout), p.dout_stride, b, 0, h);
  const float* lse = p.lse + bh * T_len;
  const float* delta = p.delta + bh * T_len;

  const int m_first = n_start / kBlockM;  // the first query block with a row >= n_start
  const int m_last = (T_len - 1) / kBlockM;

  auto load_rows = [&](int m_block) {
    const int m_start = m_block * kBlockM;
    load_tile_async<D, Cfg::kThreads>(sQ, kLd, q, p.q_stride.seq, m_start, kBlockM, T_len);
    load_tile_async<D, Cfg::kThreads>(sdO, kLd, dout, p.dout_stride.seq, m_start, kBlockM, T_len);
    for (int r = threadIdx.x; r < kBlockM; r += Cfg::kThreads) {
      const int row = m_start + r;
      sLse[r] = row < T_len ? lse[row] * kLog2e : 0.f;
      sDelta[r] = row < T_len ? delta[row] : 0.f;
    }
  };
  load_tile_async<D, Cfg::kThreads>(sK, kLd, k, p.k_stride.seq, n_start, kBlockN, T_len);
  load_tile_async<D, Cfg::kThreads>(sV, kLd, v, p.v_stride.seq, n_start, kBlockN, T_len);
  load_rows(m_first);
  cp_async_commit();

  // Phase 2 ownership: key rows n0.., head dims d0..
  const int n0 = (warp % Cfg::kWM2) * 16, d0 = (warp / Cfg::kWM2) * (D / Cfg::kWN2);
  float acc_dk[Cfg::kDF2][4], acc_dv[Cfg::kDF2][4];
  zero(acc_dk);
  zero(acc_dv);

  for (int m_block = m_first; m_block <= m_last; ++m_block) {
    const int m_start = m_block * kBlockM;
    cp_async_wait_all();
    __syncthreads();  // Q, dO, lse, delta of this block landed; phase 3 of the last block is done with sdS

    {  // Phase 1: P and dS for this warp's 16 x (kBlockN / kWN1) tile.
      const int m0 = (warp % Cfg::kWM1) * 16, c0 = (warp / Cfg::kWM1) * (kBlockN / Cfg::kWN1);
      float s[Cfg::kNF1][4], dp[Cfg::kNF1][4];
      zero(s);
      zero(dp);
      warp_gemm<T, D, Cfg::kNF1, false, false>(s, sQ, kLd, m0, sK, kLd, c0);
      warp_gemm<T, D, Cfg::kNF1, false, false>(dp, sdO, kLd, m0, sV, kLd, c0);
#pragma unroll
      for (int nf = 0; nf < Cfg::kNF1; ++nf)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r_local = m0 + g + 8 * half;
          const int row = m_start + r_local;
          const int c_local = c0 + nf * 8 + 2 * q4;
          float pv[2], ds[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = n_start + c_local + e;
            const bool valid = row < T_len && col <= row;
            pv[e] = valid ? exp2f(s[nf][2 * half + e] * scale_log2 - sLse[r_local]) : 0.f;
            ds[e] = pv[e] * (dp[nf][2 * half + e] - sDelta[r_local]);
          }
          *reinterpret_cast<uint32_t*>(&sP[r_local * kLdS + c_local]) = Tr::pack(pv[0], pv[1]);
          *reinterpret_cast<uint32_t*>(&sdS[r_local * kLdS + c_local]) = Tr::pack(ds[0], ds[1]);
        }
    }
    __syncthreads();  // P and dS complete

    // Phase 2: dV += P^T dO, dK += dS^T Q over this block's kBlockM queries.
    warp_gemm<T, kBlockM, Cfg::kDF2, true, true>(acc_dv, sP, kLdS, n0, sdO, kLd, d0);
    warp_gemm<T, kBlockM, Cfg::kDF2, true, true>(acc_dk, sdS, kLdS, n0, sQ, kLd, d0);
    __syncthreads();  // every warp is done with sQ, sdO, sP
    if (m_block < m_last) {
      load_rows(m_block + 1);
      cp_async_commit();
    }

    {  // Phase 3: dQ rows of this block += scale * dS K, into fp32 dq_accum.
      const int m0 = (warp % Cfg::kWM3) * 16, e0 = (warp / Cfg::kWM3) * Cfg::kCols3;
      constexpr int kNF3 = Cfg::kDQChunk / 8;
#pragma unroll
      for (int c = 0; c < Cfg::kCols3; c += Cfg::kDQChunk) {
        float acc[kNF3][4];
        zero(acc);
        warp_gemm<T, kBlockN, kNF3, false, true>(acc, sdS, kLdS, m0, sK, kLd, e0 + c);
#pragma unroll
        for (int nf = 0; nf < kNF3; ++nf)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = m_start + m0 + g + 8 * half;
            if (row < T_len) {
              float* dst = p.dq_accum + ((b * T_len + row) * p.heads + h) * D + e0 + c + nf * 8 + 2 * q4;
              atomicAdd(dst, p.scale * acc[nf][2 * half]);
              atomicAdd(dst + 1, p.scale * acc[nf][2 * half + 1]);
            }
          }
      }
    }
  }

  // dK (scaled) and dV through shared memory (sK, sV are free now), then 16-byte stores.
  __syncthreads();
#pragma unroll
  for (int df = 0; df < Cfg::kDF2; ++df) {
    const int col = d0 + df * 8 + 2 * q4;
    *reinterpret_cast<uint32_t*>(&sK[(n0 + g) * kLd + col]) =
        Tr::pack(p.scale * acc_dk[df][0], p.scale * acc_dk[df][1]);
    *reinterpret_cast<uint32_t*>(&sK[(n0 + g + 8) * kLd + col]) =
        Tr::pack(p.scale * acc_dk[df][2], p.scale * acc_dk[df][3]);
    *reinterpret_cast<uint32_t*>(&sV[(n0 + g) * kLd + col]) = Tr::pack(acc_dv[df][0], acc_dv[df][1]);
    *reinterpret_cast<uint32_t*>(&sV[(n0 + g + 8) * kLd + col]) = Tr::pack(acc_dv[df][2], acc_dv[df][3]);
  }
  __syncthreads();
  T* dk = row_ptr(static_cast<T*>(p.dk), p.dk_stride, b, 0, h);
  T* dv = row_ptr(static_cast<T*>(p.dv), p.dv_stride, b, 0, h);
  constexpr int kChunks = D * sizeof(T) / 16;
  for (int i = threadIdx.x; i < kBlockN * kChunks; i += Cfg::kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = n_start + r;
    if (row < T_len) {
      *reinterpret_cast<uint4*>(dk + static_cast<int64_t>(row) * p.dk_stride.seq + c * 8) =
          *reinterpret_cast<const uint4*>(&sK[r * kLd + c * 8]);
      *reinterpret_cast<uint4*>(dv + static_cast<int64_t>(row) * p.dv_stride.seq + c * 8) =
          *reinterpret_cast<const uint4*>(&sV[r * kLd + c * 8]);
    }
  }
}

// dq (dtype, strided) = dq_accum (fp32, dense (B, T, H, D)).
template <typename T>
__global__ void convert_dq_kernel(const AttentionBackwardParams p) {
  const int64_t D = p.head_dim;
  const int64_t pairs = p.batch * p.seq_len * p.heads * D / 2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = 2 * i;
    const int64_t d = e % D, row = e / D;  // row = (b * T + t) * H + h
    const int64_t h = row % p.heads, t = (row / p.heads) % p.seq_len, b = row / (p.heads * p.seq_len);
    const float2 x = *reinterpret_cast<const float2*>(p.dq_accum + e);
    T* dst = row_ptr(static_cast<T*>(p.dq), p.dq_stride, b, t, h) + d;
    *reinterpret_cast<uint32_t*>(dst) = ElemTraits<T>::pack(x.x, x.y);
  }
}

// One CTA per kBlockN keys of one (batch, head).
template <typename T, int D>
inline LaunchShape backward_mma_shape(const AttentionBackwardParams& p) {
  using Cfg = BackwardConfig<D>;
  return {dim3(static_cast<unsigned>((p.seq_len + Cfg::kBlockN - 1) / Cfg::kBlockN), static_cast<unsigned>(p.heads),
               static_cast<unsigned>(p.batch)),
          dim3(Cfg::kThreads), Cfg::template smem_bytes<T>()};
}

// A grid-stride elementwise launch over the (B, T, H, D / 2) pairs of dq.
inline LaunchShape convert_dq_shape(const AttentionBackwardParams& p) {
  const int64_t pairs = p.batch * p.seq_len * p.heads * p.head_dim / 2;
  const unsigned threads = 256;
  return {dim3(static_cast<unsigned>(std::min<int64_t>((pairs + threads - 1) / threads, 65535))), dim3(threads), 0};
}

#ifndef PRISM_CUDA_EMULATION
template <typename T, int D>
void launch_backward_mma(const AttentionBackwardParams& p) {
  launch(backward_mma_kernel<T, D>, backward_mma_shape<T, D>(p), p, "attention backward (tensor cores)");
  launch(convert_dq_kernel<T>, convert_dq_shape(p), p, "attention backward dq conversion");
}
#endif

}  // namespace prism::kernels::cuda
