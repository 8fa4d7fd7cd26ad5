#include "prism/attention/attention.h"

#include <fmt/format.h>

#include "prism/error.h"

namespace prism::attention {

Backend resolve_backend(const Options& opt, const torch::Tensor& q) {
  if (opt.backend != Backend::Auto && opt.backend != Backend::Reference)
    throw Error(fmt::format("attention back end '{}' is not available in this build", backend_name(opt.backend)),
                "attention.backend", "use attention.backend: auto or reference");
  (void)q;
  return Backend::Reference;
}

Output causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const Options& opt) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              "causal_attention: q, k, v must all be (B, T, H, D); got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  switch (resolve_backend(opt, q)) {
    default:
      return reference_attention(q, k, v, opt.dropout_p, opt.want_distance);
  }
}

}  // namespace prism::attention
