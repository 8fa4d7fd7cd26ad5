#pragma once
// Fused causal attention on the CPU (flash-style): forward and backward over
// 64 x 64 tiles with an online softmax, the log-sum-exp saved for the backward,
// the attention-distance telemetry sum_j p_ij (i - j) carried through the
// online softmax, and no T x T buffer anywhere. Plain C++: the caller
// (lib/prism/ops) fills the shared params structs and provides the
// workspace.
//
// One kernel source (attention_kernel-inl.h) written on Google Highway and
// compiled for several instruction sets, chosen at run time; a plain scalar
// implementation (attention_reference.cpp) is the correctness reference.
// fp32 and bf16 inputs, fp32 accumulation; bf16 products use AVX512-BF16 pair
// dot products or AMX tiles where the CPU has them. Any head dim, with compiled instances
// for 32, 64, 128 and 256. Threads: `num_threads` OpenMP workers over batch x
// heads x groups of query blocks (forward) or x splits of the key blocks
// (backward).
#include <cstddef>
#include <string>
#include <vector>

#include "common/attention_params.h"

namespace prism::kernels::cpu {

// A code path of the kernel: a Highway target (one instruction set) or the
// scalar reference. Avx512Bf16 is the AVX-512 target compiled once more with
// AVX512-BF16 dot products for bf16 inputs (Highway 1.0 has no such target),
// and Amx once more with AMX tile products for them (Intel Sapphire Rapids and
// later); their fp32 path is the AVX-512 one. best_isa never picks Amx: the
// bf16 path is chosen by measurement (lib/prism/ops/attention_fused.h).
enum class Isa : int {
  Scalar = 0,  // the plain C++ reference: correct, slow, never auto-selected
  Portable,    // Highway's portable baseline, plain C++ (any CPU)
  Avx2,        // x86 AVX2 + FMA
  Avx512,      // x86 AVX-512 F/BW/DQ/VL
  Avx512Bf16,  // ... + AVX512-BF16
  Neon,        // Arm NEON (AArch64)
  Sve,         // Arm SVE, any vector length
  Sve2,        // Arm SVE2
  Sve256,      // Arm SVE with 256-bit vectors (e.g. Neoverse V1)
  Sve2_128,    // Arm SVE2 with 128-bit vectors (e.g. Neoverse N2)
  Amx,         // x86 AVX-512 + AVX512-BF16 + AMX tiles (TDPBF16PS) for bf16 inputs
};

// Every code path compiled into this build, fastest first (Scalar last).
const std::vector<Isa>& compiled_isas();
// Whether this CPU (and OS) can run `isa`, and this build has it.
bool isa_supported(Isa isa);
// The fastest supported code path; the environment variable PRISM_CPU_ISA
// (a name from isa_name, e.g. "avx2") caps it, for measuring a slower
// instruction set on a faster CPU. An unknown or unsupported name throws
// std::invalid_argument naming the choices.
Isa best_isa();
// Short name ("avx512_bf16", "avx2", "neon", "portable", "scalar", ...) and a one-line
// description of the instructions it uses.
const char* isa_name(Isa isa);
std::string isa_description(Isa isa);
// The code path called `name`; throws std::invalid_argument listing the names.
Isa isa_by_name(const std::string& name);
// Whether this CPU multiplies bf16 natively (AVX512-BF16 on x86, the BF16
// extension on Arm).
bool cpu_has_native_bf16();

struct Launch {
  int num_threads = 1;
  Isa isa = Isa::Scalar;
  void* workspace = nullptr;  // *_workspace_bytes(p, num_threads, isa) bytes, 64-byte aligned
};

// Query block and key block sizes (rows of q and of k per tile).
constexpr int kBlockQ = 64;
constexpr int kBlockK = 64;

// Workspace sizes for a launch with this many threads and this code path.
// Forward: O(threads 64 D); backward: O(threads T D), plus O(B H T D) when the
// key blocks of each (b, h) are split over threads. Never O(T^2). The scalar
// reference needs none (0).
std::size_t forward_workspace_bytes(const AttentionForwardParams& p, int num_threads, Isa isa);
std::size_t backward_workspace_bytes(const AttentionBackwardParams& p, int num_threads, Isa isa);

// Writes o, lse and (when non-null) distance. Throws std::invalid_argument for
// a dtype other than F32/BF16 or a code path this CPU cannot run.
void attention_forward(const AttentionForwardParams& p, const Launch& launch);
// Writes dq, dk, dv and (when non-null) delta; dq_accum is not used on the CPU.
void attention_backward(const AttentionBackwardParams& p, const Launch& launch);

}  // namespace prism::kernels::cpu
