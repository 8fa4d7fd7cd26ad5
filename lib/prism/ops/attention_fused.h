#pragma once
// The binding of the fused CPU kernel (kernels/cpu): checks the tensors, fills
// the params structs (kernel_params.h) and runs forward and backward as one
// autograd op that saves q, k, v, the output and the log-sum-exp.
#include <torch/torch.h>

#include <string>

#include "prism/ops/attention.h"

namespace prism::attention {

struct FusedOptions {
  bool want_distance = false;
  std::string code_path;  // a name from cpu_code_paths(); "" = default_cpu_code_path()
  int num_threads = 0;    // 0: LibTorch's intra-op thread count
};

// q, k, v: (B, T, H, D) fp32 or bf16 CPU tensors; strided views are read in
// place when the D stride is 1 (copied otherwise). Throws prism::Error when
// the inputs are not supported (see fused_unsupported_reason) or the code path
// cannot run on this CPU.
Output fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const FusedOptions& opt = {});

// Why the fused kernel cannot run on these inputs, or "" when it can.
std::string fused_unsupported_reason(const torch::Tensor& q, double dropout_p);

}  // namespace prism::attention
