#pragma once
// The Highway targets of the row kernels that dispatch with HWY_DYNAMIC_DISPATCH
// (lm_softmax_simd.cpp, bias_gelu_simd.cpp). Private to kernels/cpu; built only
// with Highway.
//
// PRISM_CPU_ISA (see attention_cpu.h) holds them to that code path's instruction
// set or an older one, as it holds the fused attention kernel: PRISM_CPU_ISA=avx2
// on an AVX-512 machine runs every kernel of ours as an AVX2-only CPU would.
#include <cstdint>
#include <string>
#include <vector>

namespace prism::kernels::cpu {

// Applies PRISM_CPU_ISA to Highway's dispatch, once; every dispatching entry
// point calls it first. Throws std::invalid_argument for a code path this
// build or CPU lacks (the same message as the attention kernel's).
void apply_cpu_isa_to_dispatch();

// For tests: of `compiled` (the kernel source's HWY_TARGETS), the targets this
// CPU and OS support and PRISM_CPU_ISA allows, by name, best first.
std::vector<std::string> runnable_target_names(int64_t compiled);

// For tests: makes dispatch use the target named `name` among `compiled`'s
// runnable ones ("" or an unknown name: the best allowed again). Global: Highway
// has one set of supported targets for the process.
void force_dispatch_target(int64_t compiled, const std::string& name);

}  // namespace prism::kernels::cpu
