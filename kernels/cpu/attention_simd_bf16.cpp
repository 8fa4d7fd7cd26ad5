// The fused attention kernel's AVX-512 target compiled once more with
// AVX512-BF16 pair dot products for bf16 inputs (PRISM_BF16_DOT): Highway 1.0
// has no target for them. Only the AVX3 pass generates code; the dispatcher
// runs it where the CPU reports avx512bf16.
#include "hwy/detect_compiler_arch.h"

#if HWY_ARCH_X86 && HWY_COMPILER_GCC_ACTUAL
// Highway requires its static baseline among the targets; the baseline pass
// compiles nothing here (see the guard in attention_kernel-inl.h).
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX2 | HWY_AVX3_DL)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/attention_simd_bf16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#define PRISM_KERNEL_NS prism::kernels::cpu::simd_bf16
#define PRISM_BF16_DOT 1
#include "cpu/attention_kernel-inl.h"
#endif

#if !defined(HWY_ONCE) || HWY_ONCE
#include "cpu/attention_targets.h"

namespace prism::kernels::cpu {

const TargetKernel* bf16_dot_kernel() {
#if HWY_ARCH_X86 && HWY_COMPILER_GCC_ACTUAL && (HWY_TARGETS & HWY_AVX3)
  static const TargetKernel kernel{Isa::Avx512Bf16, HWY_AVX3, &simd_bf16::N_AVX3::forward,
                                   &simd_bf16::N_AVX3::backward, &simd_bf16::N_AVX3::vector_floats};
  return &kernel;
#else
  return nullptr;
#endif
}

}  // namespace prism::kernels::cpu
#endif
