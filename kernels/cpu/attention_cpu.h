#pragma once
// Fused causal attention on the CPU (flash-style): forward and backward over
// 64 x 64 tiles with an online softmax, the log-sum-exp saved for the backward,
// and no T x T buffer anywhere. Plain C++: the caller (lib/prism/attention)
// fills the shared params structs and provides the workspace.
//
// fp32 and bf16 inputs, fp32 accumulation (bf16 products on AVX512-BF16 pair
// dot products where the CPU has them); any head dim, with compiled instances
// for 64, 128 and 256. Threads: `num_threads` OpenMP workers over batch x heads
// x groups of query blocks (forward) or x splits of the key blocks (backward).
#include <cstddef>

#include "common/attention_params.h"

namespace prism::kernels::cpu {

// Instruction sets the kernel is compiled for; chosen at run time.
enum class Isa : int { Scalar = 0, Avx512 = 1, Avx512Bf16 = 2 };

// The best ISA this CPU (and OS) supports.
Isa best_isa();
bool isa_supported(Isa isa);
const char* isa_name(Isa isa);

struct Launch {
  int num_threads = 1;
  Isa isa = Isa::Scalar;
  void* workspace = nullptr;  // *_workspace_bytes(p, num_threads, isa) bytes, 64-byte aligned
};

// Query block and key block sizes (rows of q and of k per tile).
constexpr int kBlockQ = 64;
constexpr int kBlockK = 64;

// Workspace sizes for a launch with this many threads and this ISA. Forward:
// O(threads 64 D); backward: O(threads T D), plus O(B H T D) when the key
// blocks of each (b, h) are split over threads. Never O(T^2).
std::size_t forward_workspace_bytes(const AttentionForwardParams& p, int num_threads, Isa isa);
std::size_t backward_workspace_bytes(const AttentionBackwardParams& p, int num_threads, Isa isa);

// Writes o, lse and (when non-null) distance.
void attention_forward(const AttentionForwardParams& p, const Launch& launch);
// Writes dq, dk, dv and (when non-null) delta; dq_accum is not used on the CPU.
void attention_backward(const AttentionBackwardParams& p, const Launch& launch);

}  // namespace prism::kernels::cpu
