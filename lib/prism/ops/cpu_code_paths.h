#pragma once
// The code paths (instruction sets) of the fused CPU attention kernel: which
// this build has, which this CPU runs, which one is used, and which of them
// `auto` trusts. Kernel-free, so commands and benchmarks ask here rather than
// include kernels/.
#include <string>
#include <vector>

namespace prism::attention {

struct CpuCodePath {
  std::string name;          // "avx512_bf16", "avx512", "avx2", "neon", "sve", "portable", "scalar", ...
  std::string description;   // the instructions it uses
  bool supported = false;    // this CPU (and this build) can run it
  bool auto_eligible = false;  // `auto` picks the fused kernel on it (see resolve_backend)
};

// Every code path of this build, fastest first ("scalar", the reference, last).
std::vector<CpuCodePath> cpu_code_paths();

// The code path the fused kernel uses by default: the fastest this CPU
// supports, or the one the environment variable PRISM_CPU_ISA names (to
// measure, say, avx2 on an AVX-512 machine). Throws prism::Error for a
// PRISM_CPU_ISA this build or CPU cannot run.
CpuCodePath default_cpu_code_path();

// The supported code path called `name`; throws prism::Error naming `where`
// and the choices when there is none.
CpuCodePath cpu_code_path(const std::string& name, const std::string& where);

}  // namespace prism::attention
