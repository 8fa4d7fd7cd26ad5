#pragma once
// Where each buffer lives in the caller's workspace, shared by the dispatcher
// (which reports the size) and every instruction set's kernel (which carves
// it). Offsets are in floats from the workspace start, each 64-byte aligned;
// rows of D floats are padded to pad16(D). Defined in attention_cpu.cpp only,
// so no per-target copy of this code exists.
#include <cstdint>

#include "common/attention_params.h"
#include "cpu/attention_cpu.h"

namespace prism::kernels::cpu {

// Everything but the split dq sums is per thread, O(T D): the workspace never
// grows with B H T D, let alone T^2.
struct ForwardLayout {
  int64_t group = 1;        // query blocks per work item (they share each k and v tile)
  // Per thread, offsets from the thread's base; the first three once per block of a group:
  int64_t q_tile = 0;       // D x kBlockQ: q tile transposed
  int64_t q_tile_size = 0;
  int64_t out_acc = 0;      // kBlockQ x pad16(D)
  int64_t row_stats = 0;    // 4 x kBlockQ
  int64_t score_tile = 0;   // kBlockK x kBlockQ
  int64_t kv_tiles = 0;     // dense fp32 k and v tiles, 2 x kBlockK x pad16(D)
  int64_t p_pairs = 0;      // bf16 path: probabilities as bf16 pairs, kBlockK x kBlockQ bf16
  int64_t per_thread = 0;
  int64_t total = 0;        // floats
};

struct BackwardLayout {
  int64_t nsplit = 1;       // key blocks of one (b, h) are split over this many work items
  int64_t n_partial = 0;    // the splits' fp32 dq sums, when nsplit > 1
  int64_t dq_partial = -1;  // n_partial x (B, H, T, pad16(D))
  // Per thread, for the (b, h) it works on, offsets from the thread's base:
  int64_t rows = 0;         // dense fp32 q and dout rows (bf16 path: row pairs), 2 x T x pad16(D)
  int64_t pack_stride = 0;  // floats per query block in q_packed and dout_packed
  int64_t q_packed = 0;     // per query block: D x kBlockQ, transposed (and scaled); bf16 pairs on the pair path
  int64_t dout_packed = 0;  // the same for dout
  int64_t delta = 0;        // T: rowsum(dout * o)
  int64_t dq_acc = -1;      // one split: fp32 dq sums, T x pad16(D)
  int64_t tiles = 0;        // P and dS tiles, dK and dV sums, dense k and v tiles (+ bf16 k, v)
  int64_t pair_tiles = -1;  // bf16 path: P^T, dS^T and dS^T row pairs in bf16, 3 x kBlockK x kBlockQ bf16
  int64_t per_thread = 0;
  int64_t scratch = 0;      // start of the per-thread regions
  int64_t total = 0;
};

ForwardLayout forward_layout(const AttentionForwardParams& p, int num_threads, Isa isa);
BackwardLayout backward_layout(const AttentionBackwardParams& p, int num_threads, Isa isa);

}  // namespace prism::kernels::cpu
