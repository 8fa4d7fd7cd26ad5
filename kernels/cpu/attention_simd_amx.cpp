// The fused attention kernel's AVX-512 target compiled once more with AMX tile
// products (TDPBF16PS) for bf16 inputs (PRISM_AMX): the AVX512-BF16 build's
// pair-packed operands are AMX's tile layout, so only pair_gemm changes
// (tile_products-inl.h). Only the AVX3 pass generates code; the dispatcher runs
// it where the CPU reports AMX-BF16 and the OS grants the tile data state
// (attention_cpu.cpp, amx_usable).
#include "hwy/detect_compiler_arch.h"

#if HWY_ARCH_X86 && HWY_COMPILER_GCC_ACTUAL && HWY_ARCH_X86_64
// Highway requires its static baseline among the targets; the baseline pass
// compiles nothing here (see the guard in attention_kernel-inl.h).
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX2 | HWY_AVX3_DL)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/attention_simd_amx.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#define PRISM_KERNEL_NS prism::kernels::cpu::simd_amx
#define PRISM_BF16_DOT 1
#define PRISM_AMX 1
#include "cpu/attention_kernel-inl.h"
#endif

#if !defined(HWY_ONCE) || HWY_ONCE
#include "cpu/attention_targets.h"

namespace prism::kernels::cpu {

const TargetKernel* amx_kernel() {
#if HWY_ARCH_X86 && HWY_COMPILER_GCC_ACTUAL && HWY_ARCH_X86_64 && (HWY_TARGETS & HWY_AVX3)
  static const TargetKernel kernel{Isa::Amx, HWY_AVX3, &simd_amx::N_AVX3::forward, &simd_amx::N_AVX3::backward,
                                   &simd_amx::N_AVX3::vector_floats};
  return &kernel;
#else
  return nullptr;
#endif
}

}  // namespace prism::kernels::cpu
#endif
