// Host dispatch of the CUDA attention kernels: checks the params, switches on
// dtype and head dim, and runs the backward's rowsum(dO * O) preprocessing.
#include "cuda/attention_cuda.h"

#include <string>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/limits.h"
#include "cuda/preprocess.cuh"

namespace prism::kernels::cuda {

namespace {

// Calls f(std::integral_constant<int, D>{}) for the compiled head dim D == head_dim.
template <typename F>
void with_head_dim(int64_t head_dim, F&& f) {
  switch (head_dim) {
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 96: f(std::integral_constant<int, 96>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    case 192: f(std::integral_constant<int, 192>{}); break;
    case 256: f(std::integral_constant<int, 256>{}); break;
    default:
      throw std::runtime_error("prism CUDA attention: head dim " + std::to_string(head_dim) +
                               " has no kernel instance (32, 64, 96, 128, 192, 256); pad to the next one");
  }
}

size_t element_size(DType t) { return t == DType::F32 ? 4 : 2; }

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("prism CUDA attention: " + what);
}

// The tensor-core path copies 16-byte row chunks: every row must start 16-byte aligned.
void require_rows_aligned(const void* ptr, const Strides& s, DType t, const char* name) {
  const size_t es = element_size(t);
  const bool ok = reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (s.batch * es) % 16 == 0 &&
                  (s.seq * es) % 16 == 0 && (s.head * es) % 16 == 0;
  require(ok, std::string(name) + " rows are not 16-byte aligned (pointer or batch/seq/head stride); pass a contiguous copy");
}

}  // namespace

void attention_forward(const AttentionForwardParams& p) {
  check_sizes(p.batch, p.seq_len, p.heads, p.head_dim);
  require(p.q && p.k && p.v && p.o && p.lse, "forward needs q, k, v, o and lse");
  if (p.dtype != DType::F32) {
    require_rows_aligned(p.q, p.q_stride, p.dtype, "q");
    require_rows_aligned(p.k, p.k_stride, p.dtype, "k");
    require_rows_aligned(p.v, p.v_stride, p.dtype, "v");
    require_rows_aligned(p.o, p.o_stride, p.dtype, "o");
  }
  with_head_dim(p.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    switch (p.dtype) {
      case DType::BF16: launch_forward_mma<__nv_bfloat16, D>(p); break;
      case DType::F16: launch_forward_mma<__half, D>(p); break;
      case DType::F32: launch_forward_simt<D>(p); break;
    }
  });
}

void attention_backward(const AttentionBackwardParams& p) {
  check_sizes(p.batch, p.seq_len, p.heads, p.head_dim);
  require(p.q && p.k && p.v && p.o && p.dout && p.dq && p.dk && p.dv && p.lse && p.delta,
          "backward needs q, k, v, o, dout, dq, dk, dv, lse and the delta workspace");
  if (p.dtype != DType::F32) {
    require(p.dq_accum != nullptr, "bf16/fp16 backward needs the zero-filled fp32 dq_accum workspace (B, T, H, D)");
    require_rows_aligned(p.q, p.q_stride, p.dtype, "q");
    require_rows_aligned(p.k, p.k_stride, p.dtype, "k");
    require_rows_aligned(p.v, p.v_stride, p.dtype, "v");
    require_rows_aligned(p.dout, p.dout_stride, p.dtype, "dout");
    require_rows_aligned(p.dk, p.dk_stride, p.dtype, "dk");
    require_rows_aligned(p.dv, p.dv_stride, p.dtype, "dv");
    require(p.dq_stride.seq % 2 == 0 && p.dq_stride.head % 2 == 0 && p.dq_stride.batch % 2 == 0 &&
                reinterpret_cast<uintptr_t>(p.dq) % 4 == 0,
            "dq must allow 4-byte element pairs");
  }
  switch (p.dtype) {
    case DType::BF16: launch(delta_kernel<__nv_bfloat16>, delta_shape(p), p, "attention backward delta"); break;
    case DType::F16: launch(delta_kernel<__half>, delta_shape(p), p, "attention backward delta"); break;
    case DType::F32: launch(delta_kernel<float>, delta_shape(p), p, "attention backward delta"); break;
  }
  with_head_dim(p.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    switch (p.dtype) {
      case DType::BF16: launch_backward_mma<__nv_bfloat16, D>(p); break;
      case DType::F16: launch_backward_mma<__half, D>(p); break;
      case DType::F32: launch_backward_simt<D>(p); break;
    }
  });
}

}  // namespace prism::kernels::cuda
