// LibTorch's own fused attention (at::scaled_dot_product_attention): the
// baseline the fused kernel is measured against. No distance telemetry.
#include "prism/ops/attention.h"

namespace prism::attention {

Output sdpa_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double dropout_p) {
  // (B, T, H, D) -> (B, H, T, D) as views: SDPA reads the strides as they are.
  auto o = at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                            /*attn_mask=*/{}, dropout_p, /*is_causal=*/true);
  Output res;
  res.out = o.transpose(1, 2);
  return res;
}

}  // namespace prism::attention
