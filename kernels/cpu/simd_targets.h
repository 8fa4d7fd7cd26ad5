#pragma once
// For tests of the Highway kernels that dispatch with HWY_DYNAMIC_DISPATCH
// (lm_softmax_simd.cpp, bias_gelu_simd.cpp): the targets a kernel was compiled
// for that this CPU runs, and a switch that makes every such dispatcher use one
// of them. Private to kernels/cpu; built only with Highway.
#include <cstdint>
#include <string>
#include <vector>

namespace prism::kernels::cpu {

// Of `compiled` (the kernel source's HWY_TARGETS), the targets this CPU and OS
// support, by name, best first.
std::vector<std::string> runnable_target_names(int64_t compiled);

// Makes dispatch use the target named `name` among `compiled`'s runnable ones
// ("" or an unknown name: this CPU's own best again). Global: Highway has one
// set of supported targets for the process.
void force_dispatch_target(int64_t compiled, const std::string& name);

}  // namespace prism::kernels::cpu
