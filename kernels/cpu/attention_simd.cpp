// The fused attention kernel (attention_kernel-inl.h) compiled for every
// Highway target of this architecture: on x86 AVX-512 (Highway's AVX3), AVX2 +
// FMA; on Arm NEON, SVE, SVE2 and their fixed-length variants; everywhere the
// portable baseline (EMU128, or SCALAR on GCC < 12.3). SSSE3/SSE4 are left out (no FMA; every x86 CPU of the
// last decade has AVX2) and AVX3_DL adds nothing this kernel uses.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/attention_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#define PRISM_KERNEL_NS prism::kernels::cpu::simd
#include "cpu/attention_kernel-inl.h"

#if HWY_ONCE
#include "cpu/attention_targets.h"
#include "hwy/targets.h"

namespace prism::kernels::cpu {

#define PRISM_TARGET_KERNEL(ISA, TARGET, NS) \
  TargetKernel { ISA, TARGET, &simd::NS::forward, &simd::NS::backward, &simd::NS::vector_floats }

const std::vector<TargetKernel>& simd_kernels() {
  static const std::vector<TargetKernel> kernels = {
#if HWY_ARCH_X86
#if HWY_TARGETS & HWY_AVX3
      PRISM_TARGET_KERNEL(Isa::Avx512, HWY_AVX3, N_AVX3),
#endif
#if HWY_TARGETS & HWY_AVX2
      PRISM_TARGET_KERNEL(Isa::Avx2, HWY_AVX2, N_AVX2),
#endif
#endif
#if HWY_ARCH_ARM_A64
#if HWY_TARGETS & HWY_SVE2_128
      PRISM_TARGET_KERNEL(Isa::Sve2_128, HWY_SVE2_128, N_SVE2_128),
#endif
#if HWY_TARGETS & HWY_SVE_256
      PRISM_TARGET_KERNEL(Isa::Sve256, HWY_SVE_256, N_SVE_256),
#endif
#if HWY_TARGETS & HWY_SVE2
      PRISM_TARGET_KERNEL(Isa::Sve2, HWY_SVE2, N_SVE2),
#endif
#if HWY_TARGETS & HWY_SVE
      PRISM_TARGET_KERNEL(Isa::Sve, HWY_SVE, N_SVE),
#endif
#if HWY_TARGETS & HWY_NEON
      PRISM_TARGET_KERNEL(Isa::Neon, HWY_NEON, N_NEON),
#endif
#endif
#if HWY_TARGETS & HWY_EMU128
      PRISM_TARGET_KERNEL(Isa::Portable, HWY_EMU128, N_EMU128),
#endif
#if HWY_TARGETS & HWY_SCALAR
      PRISM_TARGET_KERNEL(Isa::Portable, HWY_SCALAR, N_SCALAR),
#endif
  };
  return kernels;
}

#undef PRISM_TARGET_KERNEL

int64_t hwy_supported_targets() { return hwy::SupportedTargets(); }

}  // namespace prism::kernels::cpu
#endif  // HWY_ONCE
