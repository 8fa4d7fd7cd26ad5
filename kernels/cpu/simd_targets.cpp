#include "cpu/simd_targets.h"

#include "hwy/targets.h"

namespace prism::kernels::cpu {

namespace {
int64_t supported_here() {
  static const int64_t here = hwy::SupportedTargets();  // before any forcing
  return here;
}
}  // namespace

std::vector<std::string> runnable_target_names(int64_t compiled) {
  std::vector<std::string> names;
  for (int64_t t = compiled & supported_here(); t != 0; t &= t - 1) names.emplace_back(hwy::TargetName(t & -t));
  return names;  // Highway's bits: lower is better
}

void force_dispatch_target(int64_t compiled, const std::string& name) {
  int64_t bit = 0;
  for (int64_t t = compiled & supported_here(); t != 0; t &= t - 1)
    if (name == hwy::TargetName(t & -t)) bit = t & -t;
  hwy::SetSupportedTargetsForTest(bit);  // 0: this CPU's own again
}

}  // namespace prism::kernels::cpu
