#pragma once
// Where each buffer lives in the caller's workspace, shared by the dispatcher
// (which reports the size) and every ISA's kernel (which carves it). Offsets are
// in floats from the workspace start, each 64-byte aligned. Defined in
// attention_cpu.cpp only, so no ISA-specific copy of this code exists.
#include <cstdint>

#include "common/attention_params.h"

namespace prism::kernels::cpu {

struct ForwardLayout {
  int64_t k_f32 = -1, v_f32 = -1;  // fp32 copies of k and v, (B, H, T, D), bf16 inputs only
  int64_t scratch = 0;             // per-thread tiles
  int64_t scratch_per_thread = 0;
  int64_t total = 0;               // floats
};

struct BackwardLayout {
  int64_t nsplit = 1;              // key blocks of one (b, h) are split over this many work items
  bool dq_direct = true;           // accumulate straight into dq (fp32, one split)
  int64_t q_f32 = -1, k_f32 = -1, v_f32 = -1, dout_f32 = -1;  // bf16 inputs only, (B, H, T, D)
  int64_t q_packed = 0, dout_packed = 0;  // per (b, h, query block): D x kBlockQ, transposed
  int64_t delta = -1;              // (B, H, T) when the caller gives no delta buffer
  int64_t dq_partial = -1;         // nsplit x (B, H, T, D) when not dq_direct
  int64_t scratch = 0, scratch_per_thread = 0;
  int64_t total = 0;
};

ForwardLayout forward_layout(const AttentionForwardParams& p, int num_threads);
BackwardLayout backward_layout(const AttentionBackwardParams& p, int num_threads);

}  // namespace prism::kernels::cpu
