#pragma once
// Host entry points of the CUDA causal attention kernels (flash-style: tiled,
// online softmax, saved log-sum-exp, backward by recomputation, no T x T buffer).
// Framework-free: the caller fills the params structs of kernels/common and owns
// every buffer. Errors (bad shapes, CUDA failures) throw std::runtime_error.
//
// Paths: bf16/fp16 run on the tensor cores (mma.sync m16n8k16, fp32 accumulation,
// sm_80+); fp32 runs on a CUDA-core path in full fp32. Head dims are template
// instances: 32, 64, 96, 128, 192, 256. q/k/v/o/dout rows must be 16-byte aligned
// (base pointers and batch/seq/head strides multiples of 16 bytes).
#include <cstdint>

#include "common/attention_params.h"
#include "cuda/limits.h"  // supports_head_dim, padded_head_dim, check_sizes

namespace prism::kernels::cuda {

// Writes o, lse and (when p.distance is set) distance. Runs on p.stream.
void attention_forward(const AttentionForwardParams& p);

// Writes dq, dk, dv. Needs workspaces: p.delta (B, H, T) fp32, and for bf16/fp16
// p.dq_accum (B, T, H, D) fp32, zero-filled by the caller on the same stream.
void attention_backward(const AttentionBackwardParams& p);

}  // namespace prism::kernels::cuda
