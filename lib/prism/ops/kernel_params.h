#pragma once
// Tensors to kernel parameters: the one place that turns at::Tensor into the
// plain structs of kernels/common (pointers, strides, sizes, dtype), for the
// fused CPU binding and the CUDA binding alike, and the one error style both
// use (prism::Error, also for failures the kernels report).
#include <torch/torch.h>

#include <exception>
#include <string>

#include "common/attention_params.h"
#include "prism/error.h"

namespace prism::attention {

// (B, T, H) strides of a (B, T, H, D) tensor, in elements.
kernels::Strides strides_of(const torch::Tensor& t);

// The kernels' name for a dtype; throws prism::Error (naming `where`) for
// dtypes other than float32, bfloat16 and float16.
kernels::DType kernel_dtype(torch::ScalarType t, const std::string& where);

// q, k, v must be three (B, T, H, D) tensors of one dtype; throws prism::Error naming `where`.
void check_qkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const std::string& where);

// Forward parameters: q, k, v, out (B, T, H, D); lse and, when defined,
// distance (B, H, T) float32. The stream is left for the caller.
kernels::AttentionForwardParams forward_params(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& out, const torch::Tensor& lse,
                                               const torch::Tensor& distance, double scale, const std::string& where);

// Backward parameters; delta and dq_accum are optional workspaces (undefined: null).
kernels::AttentionBackwardParams backward_params(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& v, const torch::Tensor& out,
                                                 const torch::Tensor& dout, const torch::Tensor& dq,
                                                 const torch::Tensor& dk, const torch::Tensor& dv,
                                                 const torch::Tensor& lse, const torch::Tensor& delta,
                                                 const torch::Tensor& dq_accum, double scale,
                                                 const std::string& where);

// Runs a kernel call; a failure the kernel layer reports (std::exception)
// becomes a prism::Error naming `where` and a fix.
template <typename F>
void run_kernel(const std::string& where, const std::string& fix, F&& f) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what(), where, fix);
  }
}

}  // namespace prism::attention
