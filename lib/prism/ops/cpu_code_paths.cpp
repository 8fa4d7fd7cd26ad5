#include "prism/ops/cpu_code_paths.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "cpu/attention_cpu.h"
#include "prism/error.h"
#include "prism/ops/cpu_isa.h"

namespace prism::attention {

namespace {

namespace kc = kernels::cpu;

// The code paths on which `prism bench attention` measured the fused kernel
// meeting its targets against SDPA and the reference (README, "Attention back
// ends"); the others run when asked for, and auto leaves them alone until
// someone measures them.
bool measured_fast(kc::Isa isa) {
  return isa == kc::Isa::Avx2 || isa == kc::Isa::Avx512 || isa == kc::Isa::Avx512Bf16 || isa == kc::Isa::Amx;
}

CpuCodePath describe(kc::Isa isa) {
  return {kc::isa_name(isa), kc::isa_description(isa), kc::isa_supported(isa), measured_fast(isa)};
}

}  // namespace

std::vector<CpuCodePath> cpu_code_paths() {
  std::vector<CpuCodePath> v;
  for (kc::Isa isa : kc::compiled_isas()) v.push_back(describe(isa));
  return v;
}

CpuCodePath default_cpu_code_path() {
  try {
    return describe(kc::best_isa());
  } catch (const std::invalid_argument& e) {
    std::vector<std::string> names;
    for (const auto& p : cpu_code_paths())
      if (p.supported) names.push_back(p.name);
    throw Error(e.what(), "environment variable PRISM_CPU_ISA",
                fmt::format("unset it, or set one this CPU runs: {}", fmt::join(names, ", ")));
  }
}

CpuCodePath cpu_code_path(const std::string& name, const std::string& where) {
  std::vector<std::string> names;
  for (const auto& p : cpu_code_paths()) {
    if (p.name == name && p.supported) return p;
    if (p.supported) names.push_back(p.name);
  }
  throw Error(fmt::format("the fused CPU kernel has no code path '{}' that this CPU runs", name), where,
              fmt::format("use one of: {}", fmt::join(names, ", ")));
}

}  // namespace prism::attention

namespace prism {

void check_cpu_isa_env() {
  // The fused kernel's default code path reads and checks PRISM_CPU_ISA for every kernel.
  static const bool checked = (attention::default_cpu_code_path(), true);  // a throw leaves it unset: checked again
  (void)checked;
}

}  // namespace prism
