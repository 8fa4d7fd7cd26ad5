#include "cpu/simd_targets.h"

#include <cstdlib>

#include "cpu/attention_cpu.h"
#include "cpu/attention_targets.h"
#include "hwy/targets.h"

namespace prism::kernels::cpu {

namespace {

int64_t supported_here() {
  static const int64_t here = hwy::SupportedTargets();  // before any forcing
  return here;
}

// The Highway targets PRISM_CPU_ISA allows: its code path's target and every
// lower (older, narrower) one; all when it is unset.
int64_t allowed_by_env() {
  static const int64_t allowed = []() -> int64_t {
    const char* env = std::getenv("PRISM_CPU_ISA");
    if (!env || !*env) return ~int64_t{0};
    Isa isa = best_isa();  // parses and checks PRISM_CPU_ISA
    if (isa == Isa::Scalar) isa = Isa::Portable;  // the row kernels' plainest code is Highway's portable target
    const TargetKernel* k = kernel_of(isa);
    const int64_t bit = k ? k->hwy_target : 0;
    return bit == 0 ? ~int64_t{0} : ~(bit - 1);  // Highway's bits: higher is older
  }();
  return allowed;
}

}  // namespace

void apply_cpu_isa_to_dispatch() {
  static const bool applied = [] {
    const int64_t here = supported_here();
    if (const int64_t allowed = allowed_by_env(); allowed != ~int64_t{0}) hwy::SetSupportedTargetsForTest(here & allowed);
    return true;
  }();
  (void)applied;
}

std::vector<std::string> runnable_target_names(int64_t compiled) {
  std::vector<std::string> names;
  for (int64_t t = compiled & supported_here() & allowed_by_env(); t != 0; t &= t - 1)
    names.emplace_back(hwy::TargetName(t & -t));
  return names;  // Highway's bits: lower is better
}

void force_dispatch_target(int64_t compiled, const std::string& name) {
  apply_cpu_isa_to_dispatch();
  const int64_t runnable = compiled & supported_here() & allowed_by_env();
  int64_t bit = 0;
  for (int64_t t = runnable; t != 0; t &= t - 1)
    if (name == hwy::TargetName(t & -t)) bit = t & -t;
  // None named: what PRISM_CPU_ISA allows (0 asks Highway for the CPU's own targets).
  const int64_t all = supported_here() & allowed_by_env();
  hwy::SetSupportedTargetsForTest(bit != 0 ? bit : (all == supported_here() ? 0 : all));
}

}  // namespace prism::kernels::cpu
