#pragma once
// The binding of the fused CPU kernel (kernels/cpu): checks the tensors, fills
// the params structs (kernel_params.h) and runs forward and backward as one
// autograd op that saves q, k, v, the output and the log-sum-exp.
#include <torch/torch.h>

#include <string>

#include "prism/ops/attention.h"
#include "prism/ops/cpu_code_paths.h"

namespace prism::attention {

struct FusedOptions {
  bool want_distance = false;
  std::string code_path;  // a name from cpu_code_paths(); "" = fused_code_path(the inputs' dtype)
  int num_threads = 0;    // 0: LibTorch's intra-op thread count
};

// q, k, v: (B, T, H, D) fp32 or bf16 CPU tensors; strided views are read in
// place when the D stride is 1 (copied otherwise). Throws prism::Error when
// the inputs are not supported (see fused_unsupported_reason) or the code path
// cannot run on this CPU.
Output fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const FusedOptions& opt = {});

// The code path the fused kernel takes by default for inputs of `dtype`: for fp32,
// default_cpu_code_path(); for bf16 on a CPU whose best path is avx512_bf16, the fastest
// of the bf16 paths it runs (amx: AMX tiles; avx512_bf16: AVX512-BF16 pair dot products;
// avx512: fp32 arithmetic on the same bf16 inputs), measured once per machine (a 512-token
// forward + backward on each path, rounds taking turns, best of each; well under a second)
// and cached (machine_cache.h), so every process there takes the same path. On an Intel
// Xeon with AMX (Sapphire Rapids and later) amx was fastest and the pair products ran
// 1.45x slower than fp32 arithmetic; on Zen 4/5 (no AMX) the pair products are the faster
// kind. PRISM_CPU_ISA, when set, is obeyed as it is.
CpuCodePath fused_code_path(torch::ScalarType dtype);

// What the bf16 measurement found, one line ("" until it ran, or where it does not run).
std::string bf16_code_path_reason();

// Why the fused kernel cannot run on these inputs, or "" when it can.
std::string fused_unsupported_reason(const torch::Tensor& q, double dropout_p);

}  // namespace prism::attention
