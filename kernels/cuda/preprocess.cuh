#pragma once
// Backward preprocessing shared by both paths: delta = rowsum(dO * O), the
// softmax-gradient term dS = P * (dP - delta) subtracts.
#include "common.cuh"

namespace prism::kernels::cuda {

// delta[b, h, t] = sum_d dout[b, t, h, d] * o[b, t, h, d], one warp per row.
template <typename T>
__global__ void delta_kernel(const AttentionBackwardParams p) {
  const int64_t rows = p.batch * p.seq_len * p.heads;
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    const int64_t h = r % p.heads, t = (r / p.heads) % p.seq_len, b = r / (p.heads * p.seq_len);
    const T* o = row_ptr(static_cast<const T*>(p.o), p.o_stride, b, t, h);
    const T* d = row_ptr(static_cast<const T*>(p.dout), p.dout_stride, b, t, h);
    float sum = 0.f;
    for (int64_t i = lane; i < p.head_dim; i += 32)
      sum += ElemTraits<T>::to_float(o[i]) * ElemTraits<T>::to_float(d[i]);
    sum = warp_sum(sum);
    if (lane == 0) p.delta[(b * p.heads + h) * p.seq_len + t] = sum;
  }
}

inline LaunchShape delta_shape(const AttentionBackwardParams& p) {
  const int64_t rows = p.batch * p.seq_len * p.heads;
  const unsigned threads = 256, rows_per_block = threads / 32;
  return {dim3(static_cast<unsigned>(std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, 65535))),
          dim3(threads), 0};
}

}  // namespace prism::kernels::cuda
