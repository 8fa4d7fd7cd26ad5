#pragma once
// Causal attention forward and backward for fp32 inputs on the CUDA cores, in
// full fp32 (the tensor cores would round the operands to tf32).
//
// Same algorithm as the tensor-core path, with one key (or query) per lane:
// a CTA owns kRows rows (4 warps x 4 rows); 32-row tiles of the other side
// stream through shared memory; a lane computes one score by a dot product
// over D and the warp shares the probabilities with shuffles. The backward is
// two passes with no atomics: dQ by query rows, then dK and dV by key rows.
#include "common.cuh"

namespace prism::kernels::cuda {

struct SimtConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerWarp = 4;
  static constexpr int kRows = kWarps * kRowsPerWarp;  // rows owned by a CTA
  static constexpr int kTile = 32;                     // rows per streamed tile (one per lane)
};

// Copies rows [row0, row0 + rows) of a strided (T, D) fp32 matrix into smem
// with row stride ld; rows >= n_valid become zeros.
template <int D>
__device__ __forceinline__ void load_rows_f32(float* smem, int ld, const float* g, int64_t seq_stride, int row0,
                                              int rows, int n_valid) {
  for (int i = threadIdx.x; i < rows * D; i += SimtConfig::kThreads) {
    const int r = i / D, d = i % D;
    const int row = row0 + r;
    smem[r * ld + d] = row < n_valid ? g[static_cast<int64_t>(row) * seq_stride + d] : 0.f;
  }
}

template <int D>
__device__ __forceinline__ float dot_row(const float* a, const float* b) {
  float s = 0.f;
#pragma unroll 8
  for (int d = 0; d < D; ++d) s = fmaf(a[d], b[d], s);
  return s;
}

template <int D, bool kDistance>
__global__ void __launch_bounds__(SimtConfig::kThreads) forward_simt_kernel(const AttentionForwardParams p) {
  using C = SimtConfig;
  constexpr int kDL = D / 32, kLdK = D + 1;  // +1: lanes read different rows of sK conflict-free
  PRISM_DYNAMIC_SMEM(smem_raw);
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sK = sQ + C::kRows * D;
  float* sV = sK + C::kTile * kLdK;

  const int T_len = static_cast<int>(p.seq_len);
  const int m_start = (gridDim.x - 1 - blockIdx.x) * C::kRows;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * p.heads + h;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* q = row_ptr(static_cast<const float*>(p.q), p.q_stride, b, 0, h);
  const float* k = row_ptr(static_cast<const float*>(p.k), p.k_stride, b, 0, h);
  const float* v = row_ptr(static_cast<const float*>(p.v), p.v_stride, b, 0, h);

  load_rows_f32<D>(sQ, D, q, p.q_stride.seq, m_start, C::kRows, T_len);
  // Per row: m, l and the distance accumulator sum_j p_ij (i - j) (as it is:
  // i - sum_j p_ij j / l would cancel for a local head at large i).
  float o[C::kRowsPerWarp][kDL], m[C::kRowsPerWarp], l[C::kRowsPerWarp], ld[C::kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < C::kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = ld[i] = 0.f;
#pragma unroll
    for (int dd = 0; dd < kDL; ++dd) o[i][dd] = 0.f;
  }
  const int n_last = (min(m_start + C::kRows, T_len) - 1) / C::kTile;
  for (int n_block = 0; n_block <= n_last; ++n_block) {
    const int n_start = n_block * C::kTile;
    __syncthreads();  // the previous tile is consumed
    load_rows_f32<D>(sK, kLdK, k, p.k_stride.seq, n_start, C::kTile, T_len);
    load_rows_f32<D>(sV, D, v, p.v_stride.seq, n_start, C::kTile, T_len);
    __syncthreads();
    const int key = n_start + lane;
#pragma unroll
    for (int i = 0; i < C::kRowsPerWarp; ++i) {
      const int r = warp * C::kRowsPerWarp + i, row = m_start + r;
      float s = dot_row<D>(sQ + r * D, sK + lane * kLdK) * p.scale;
      if (key > row) s = -INFINITY;
      const float m_new = fmaxf(m[i], warp_max(s));
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = expf(m[i] - m_use);
      const float pv = expf(s - m_use);
      m[i] = m_new;
      l[i] = l[i] * alpha + pv;  // per lane; reduced at the end
      if constexpr (kDistance) ld[i] = ld[i] * alpha + pv * static_cast<float>(row - key);  // masked: pv = 0
#pragma unroll
      for (int dd = 0; dd < kDL; ++dd) o[i][dd] *= alpha;
#pragma unroll 4
      for (int kk = 0; kk < C::kTile; ++kk) {
        const float pk = __shfl_sync(0xffffffffu, pv, kk);
#pragma unroll
        for (int dd = 0; dd < kDL; ++dd) o[i][dd] = fmaf(pk, sV[kk * D + lane + 32 * dd], o[i][dd]);
      }
    }
  }
  float* out = row_ptr(static_cast<float*>(p.o), p.o_stride, b, 0, h);
#pragma unroll
  for (int i = 0; i < C::kRowsPerWarp; ++i) {
    const int row = m_start + warp * C::kRowsPerWarp + i;
    const float sum = warp_sum(l[i]);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    float sum_d = 0.f;
    if constexpr (kDistance) sum_d = warp_sum(ld[i]);
    if (row < T_len) {
#pragma unroll
      for (int dd = 0; dd < kDL; ++dd) out[static_cast<int64_t>(row) * p.o_stride.seq + lane + 32 * dd] = o[i][dd] * inv;
      if (lane == 0) {
        p.lse[bh * T_len + row] = m[i] + logf(sum);
        if constexpr (kDistance) p.distance[bh * T_len + row] = sum_d * inv;
      }
    }
  }
}

// dQ = scale * sum_j dS_ij k_j, by query rows.
template <int D>
__global__ void __launch_bounds__(SimtConfig::kThreads) backward_dq_simt_kernel(const AttentionBackwardParams p) {
  using C = SimtConfig;
  constexpr int kDL = D / 32, kLd = D + 1;
  PRISM_DYNAMIC_SMEM(smem_raw);
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sdO = sQ + C::kRows * D;
  float* sK = sdO + C::kRows * D;
  float* sV = sK + C::kTile * kLd;

  const int T_len = static_cast<int>(p.seq_len);
  const int m_start = (gridDim.x - 1 - blockIdx.x) * C::kRows;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * p.heads + h;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* q = row_ptr(static_cast<const float*>(p.q), p.q_stride, b, 0, h);
  const float* k = row_ptr(static_cast<const float*>(p.k), p.k_stride, b, 0, h);
  const float* v = row_ptr(static_cast<const float*>(p.v), p.v_stride, b, 0, h);
  const float* dout = row_ptr(static_cast<const float*>(p.dout), p.dout_stride, b, 0, h);

  load_rows_f32<D>(sQ, D, q, p.q_stride.seq, m_start, C::kRows, T_len);
  load_rows_f32<D>(sdO, D, dout, p.dout_stride.seq, m_start, C::kRows, T_len);
  float dq[C::kRowsPerWarp][kDL], lse[C::kRowsPerWarp], delta[C::kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < C::kRowsPerWarp; ++i) {
    const int row = m_start + warp * C::kRowsPerWarp + i;
    lse[i] = row < T_len ? p.lse[bh * T_len + row] : 0.f;
    delta[i] = row < T_len ? p.delta[bh * T_len + row] : 0.f;
#pragma unroll
    for (int dd = 0; dd < kDL; ++dd) dq[i][dd] = 0.f;
  }
  const int n_last = (min(m_start + C::kRows, T_len) - 1) / C::kTile;
  for (int n_block = 0; n_block <= n_last; ++n_block) {
    const int n_start = n_block * C::kTile;
    __syncthreads();
    load_rows_f32<D>(sK, kLd, k, p.k_stride.seq, n_start, C::kTile, T_len);
    load_rows_f32<D>(sV, kLd, v, p.v_stride.seq, n_start, C::kTile, T_len);
    __syncthreads();
    const int key = n_start + lane;
#pragma unroll
    for (int i = 0; i < C::kRowsPerWarp; ++i) {
      const int r = warp * C::kRowsPerWarp + i, row = m_start + r;
      const float s = dot_row<D>(sQ + r * D, sK + lane * kLd) * p.scale;
      const float dp = dot_row<D>(sdO + r * D, sV + lane * kLd);
      const float pv = (key <= row && row < T_len) ? expf(s - lse[i]) : 0.f;
      const float ds = pv * (dp - delta[i]);
#pragma unroll 4
      for (int kk = 0; kk < C::kTile; ++kk) {
        const float dsk = __shfl_sync(0xffffffffu, ds, kk);
#pragma unroll
        for (int dd = 0; dd < kDL; ++dd) dq[i][dd] = fmaf(dsk, sK[kk * kLd + lane + 32 * dd], dq[i][dd]);
      }
    }
  }
  float* dqp = row_ptr(static_cast<float*>(p.dq), p.dq_stride, b, 0, h);
#pragma unroll
  for (int i = 0; i < C::kRowsPerWarp; ++i) {
    const int row = m_start + warp * C::kRowsPerWarp + i;
    if (row < T_len)
#pragma unroll
      for (int dd = 0; dd < kDL; ++dd) dqp[static_cast<int64_t>(row) * p.dq_stride.seq + lane + 32 * dd] = p.scale * dq[i][dd];
  }
}

// dK = scale * sum_i dS_ij q_i and dV = sum_i P_ij dO_i, by key rows.
template <int D>
__global__ void __launch_bounds__(SimtConfig::kThreads) backward_dkdv_simt_kernel(const AttentionBackwardParams p) {
  using C = SimtConfig;
  constexpr int kDL = D / 32, kLd = D + 1;
  PRISM_DYNAMIC_SMEM(smem_raw);
  float* sK = reinterpret_cast<float*>(smem_raw);
  float* sV = sK + C::kRows * D;
  float* sQ = sV + C::kRows * D;
  float* sdO = sQ + C::kTile * kLd;
  float* sLse = sdO + C::kTile * kLd;
  float* sDelta = sLse + C::kTile;

  const int T_len = static_cast<int>(p.seq_len);
  const int n_start = blockIdx.x * C::kRows;  // key block 0 has the most queries: first
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * p.heads + h;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* q = row_ptr(static_cast<const float*>(p.q), p.q_stride, b, 0, h);
  const float* k = row_ptr(static_cast<const float*>(p.k), p.k_stride, b, 0, h);
  const float* v = row_ptr(static_cast<const float*>(p.v), p.v_stride, b, 0, h);
  const float* dout = row_ptr(static_cast<const float*>(p.dout), p.dout_stride, b, 0, h);

  load_rows_f32<D>(sK, D, k, p.k_stride.seq, n_start, C::kRows, T_len);
  load_rows_f32<D>(sV, D, v, p.v_stride.seq, n_start, C::kRows, T_len);
  float dk[C::kRowsPerWarp][kDL], dv[C::kRowsPerWarp][kDL];
#pragma unroll
  for (int i = 0; i < C::kRowsPerWarp; ++i)
#pragma unroll
    for (int dd = 0; dd < kDL; ++dd) dk[i][dd] = dv[i][dd] = 0.f;

  const int m_first = n_start / C::kTile, m_last = (T_len - 1) / C::kTile;
  for (int m_block = m_first; m_block <= m_last; ++m_block) {
    const int m_start = m_block * C::kTile;
    __syncthreads();
    load_rows_f32<D>(sQ, kLd, q, p.q_stride.seq, m_start, C::kTile, T_len);
    load_rows_f32<D>(sdO, kLd, dout, p.dout_stride.seq, m_start, C::kTile, T_len);
    if (threadIdx.x < C::kTile) {
      const int row = m_start + threadIdx.x;
      sLse[threadIdx.x] = row < T_len ? p.lse[bh * T_len + row] : 0.f;
      sDelta[threadIdx.x] = row < T_len ? p.delta[bh * T_len + row] : 0.f;
    }
    __syncthreads();
    const int query = m_start + lane;
#pragma unroll
    for (int i = 0; i < C::kRowsPerWarp; ++i) {
      const int r = warp * C::kRowsPerWarp + i, key = n_start + r;
      const float s = dot_row<D>(sQ + lane * kLd, sK + r * D) * p.scale;
      const float dp = dot_row<D>(sdO + lane * kLd, sV + r * D);
      const float pv = (query >= key && query < T_len) ? expf(s - sLse[lane]) : 0.f;
      const float ds = pv * (dp - sDelta[lane]);
#pragma unroll 4
      for (int kk = 0; kk < C::kTile; ++kk) {
        const float pk = __shfl_sync(0xffffffffu, pv, kk);
        const float dsk = __shfl_sync(0xffffffffu, ds, kk);
#pragma unroll
        for (int dd = 0; dd < kDL; ++dd) {
          dv[i][dd] = fmaf(pk, sdO[kk * kLd + lane + 32 * dd], dv[i][dd]);
          dk[i][dd] = fmaf(dsk, sQ[kk * kLd + lane + 32 * dd], dk[i][dd]);
        }
      }
    }
  }
  float* dkp = row_ptr(static_cast<float*>(p.dk), p.dk_stride, b, 0, h);
  float* dvp = row_ptr(static_cast<float*>(p.dv), p.dv_stride, b, 0, h);
#pragma unroll
  for (int i = 0; i < C::kRowsPerWarp; ++i) {
    const int key = n_start + warp * C::kRowsPerWarp + i;
    if (key < T_len)
#pragma unroll
      for (int dd = 0; dd < kDL; ++dd) {
        dkp[static_cast<int64_t>(key) * p.dk_stride.seq + lane + 32 * dd] = p.scale * dk[i][dd];
        dvp[static_cast<int64_t>(key) * p.dv_stride.seq + lane + 32 * dd] = dv[i][dd];
      }
  }
}

// One CTA per kRows query rows (forward, dQ) or key rows (dK, dV) of one (batch, head).
template <int D>
inline LaunchShape simt_shape(int64_t batch, int64_t seq_len, int64_t heads, size_t smem_floats) {
  using C = SimtConfig;
  return {dim3(static_cast<unsigned>((seq_len + C::kRows - 1) / C::kRows), static_cast<unsigned>(heads),
               static_cast<unsigned>(batch)),
          dim3(C::kThreads), smem_floats * sizeof(float)};
}
template <int D>
inline LaunchShape forward_simt_shape(const AttentionForwardParams& p) {
  using C = SimtConfig;
  return simt_shape<D>(p.batch, p.seq_len, p.heads, C::kRows * D + C::kTile * (D + 1) + C::kTile * D);
}
template <int D>
inline LaunchShape backward_dq_simt_shape(const AttentionBackwardParams& p) {
  using C = SimtConfig;
  return simt_shape<D>(p.batch, p.seq_len, p.heads, 2 * C::kRows * D + 2 * C::kTile * (D + 1));
}
template <int D>
inline LaunchShape backward_dkdv_simt_shape(const AttentionBackwardParams& p) {
  using C = SimtConfig;
  return simt_shape<D>(p.batch, p.seq_len, p.heads, 2 * C::kRows * D + 2 * C::kTile * (D + 1) + 2 * C::kTile);
}

#ifndef PRISM_CUDA_EMULATION
template <int D>
void launch_forward_simt(const AttentionForwardParams& p) {
  if (p.distance) launch(forward_simt_kernel<D, true>, forward_simt_shape<D>(p), p, "attention forward (fp32)");
  else launch(forward_simt_kernel<D, false>, forward_simt_shape<D>(p), p, "attention forward (fp32)");
}

template <int D>
void launch_backward_simt(const AttentionBackwardParams& p) {
  launch(backward_dq_simt_kernel<D>, backward_dq_simt_shape<D>(p), p, "attention backward dq (fp32)");
  launch(backward_dkdv_simt_kernel<D>, backward_dkdv_simt_shape<D>(p), p, "attention backward dk/dv (fp32)");
}
#endif

}  // namespace prism::kernels::cuda
