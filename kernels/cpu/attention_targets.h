#pragma once
// The compiled code paths of the fused CPU kernel, for the dispatcher
// (attention_cpu.cpp): each Highway target of attention_simd.cpp, the
// AVX512-BF16 build of attention_simd_bf16.cpp, the AMX build of
// attention_simd_amx.cpp, and the scalar reference.
// Private to kernels/cpu.
#include <cstdint>
#include <vector>

#include "cpu/attention_cpu.h"

namespace prism::kernels::cpu {

struct TargetKernel {
  Isa isa;
  int64_t hwy_target;  // Highway's bit for the instruction set (HWY_AVX2, ...)
  void (*forward)(const AttentionForwardParams&, const Launch&);
  void (*backward)(const AttentionBackwardParams&, const Launch&);
  // Floats per vector on this CPU: call only where the target is supported.
  int64_t (*vector_floats)();
};

// Every Highway target compiled into attention_simd.cpp, best first; empty
// when the build has no Highway (PRISM_HAVE_HIGHWAY undefined).
const std::vector<TargetKernel>& simd_kernels();
// The AVX-512 target with AVX512-BF16 pair products, or nullptr when this
// build (compiler, architecture) has none.
const TargetKernel* bf16_dot_kernel();
// The AVX-512 target with AMX tile products (TDPBF16PS) for bf16 inputs, or
// nullptr when this build (compiler, architecture) has none.
const TargetKernel* amx_kernel();
// The compiled kernel of a code path (the AVX512-BF16 build for Avx512Bf16),
// or nullptr for Scalar and for paths this build lacks.
const TargetKernel* kernel_of(Isa isa);
// Highway's targets this CPU and OS support (hwy::SupportedTargets), 0 without Highway.
int64_t hwy_supported_targets();

namespace reference {
// Plain C++ in double precision, one (b, h) per OpenMP thread; no workspace.
void forward(const AttentionForwardParams& p, const Launch& launch);
void backward(const AttentionBackwardParams& p, const Launch& launch);
}  // namespace reference

}  // namespace prism::kernels::cpu
