#pragma once
// Parameters of the fused causal attention kernels, shared by the CPU (kernels/cpu)
// and CUDA (kernels/cuda) back ends. Plain C++: raw pointers, sizes and strides
// in elements, no LibTorch types. lib/prism/ops fills these from tensors.
//
// Layout: q, k, v, o, dout, dq, dk, dv are (B, T, H, D) with unit stride along
// D and arbitrary strides along B, T and H, so the strided q/k/v views of a
// fused qkv projection (B, T, 3, H, D) are read without copies.
// Row statistics (lse, delta, distance) are dense float32 (B, H, T).
#include <cstdint>

namespace prism::kernels {

enum class DType : int { F32 = 0, BF16 = 1, F16 = 2 };

struct Strides {
  int64_t batch = 0, seq = 0, head = 0;  // in elements; the D stride is 1
};

struct AttentionForwardParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  Strides q_stride, k_stride, v_stride, o_stride;
  float* lse = nullptr;       // (B, H, T): log-sum-exp of the scaled scores of each query row
  float* distance = nullptr;  // (B, H, T) or nullptr: sum_j p_ij (i - j), in tokens
  int64_t batch = 0, seq_len = 0, heads = 0, head_dim = 0;
  float scale = 1.0f;         // softmax scale, usually 1/sqrt(head_dim)
  DType dtype = DType::F32;   // of q, k, v, o (accumulation is always fp32)
  void* stream = nullptr;     // cudaStream_t for the CUDA back end; unused on the CPU
};

struct AttentionBackwardParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  Strides q_stride, k_stride, v_stride, o_stride, dout_stride, dq_stride, dk_stride, dv_stride;
  const float* lse = nullptr; // from the forward
  float* delta = nullptr;     // (B, H, T) workspace: rowsum(dout * o)
  float* dq_accum = nullptr;  // optional fp32 workspace (B, T, H, D) for back ends that accumulate dq
  int64_t batch = 0, seq_len = 0, heads = 0, head_dim = 0;
  float scale = 1.0f;
  DType dtype = DType::F32;
  void* stream = nullptr;
};

}  // namespace prism::kernels
