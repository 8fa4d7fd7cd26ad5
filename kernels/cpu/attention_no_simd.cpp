// A build without Highway (the device-minimal build on a GPU machine that
// lacks libhwy-dev): the fused CPU kernel has the scalar reference only.
#include "cpu/attention_targets.h"

namespace prism::kernels::cpu {

const std::vector<TargetKernel>& simd_kernels() {
  static const std::vector<TargetKernel> none;
  return none;
}
const TargetKernel* bf16_dot_kernel() { return nullptr; }
const TargetKernel* amx_kernel() { return nullptr; }
int64_t hwy_supported_targets() { return 0; }

}  // namespace prism::kernels::cpu
