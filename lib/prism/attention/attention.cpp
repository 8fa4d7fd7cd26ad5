#include "prism/attention/attention.h"

#include <fmt/format.h>

#include "prism/attention/fused.h"
#include "prism/error.h"
#ifdef PRISM_WITH_CUDA
#include "prism/attention/cuda/cuda_attention.h"
#endif

namespace prism::attention {

namespace {

// Measured with `prism bench attention` (AMD EPYC Zen 4, AVX-512 + BF16, 1 and
// 2 threads): the fused kernel takes 0.5-0.9x SDPA's time for fp32 and bf16 at
// every head dim tried (32-768) and T from 64 to 4096, and it is the only O(T)
// source of distance. Its portable (non-AVX-512) build is ~6x slower than SDPA
// and ~2-3x slower than the reference, so auto leaves it alone there.
Backend auto_backend(const Options& opt, const torch::Tensor& q) {
#ifdef PRISM_WITH_CUDA
  // The CUDA kernel covers fp32/bf16/fp16, head dims up to 256, no dropout; it reports distance too.
  if (q.is_cuda() && cuda_attention_supports(q, opt.dropout_p)) return Backend::Cuda;
#endif
  if (fused_unsupported_reason(q, opt.dropout_p).empty() && kernels::cpu::best_isa() != kernels::cpu::Isa::Scalar)
    return Backend::Fused;
  // SDPA has no distance output; the reference computes it from explicit probabilities.
  return opt.want_distance ? Backend::Reference : Backend::Sdpa;
}

}  // namespace

bool supports_distance(Backend b) { return b == Backend::Reference || b == Backend::Fused || b == Backend::Cuda; }

Backend resolve_backend(const Options& opt, const torch::Tensor& q) {
  switch (opt.backend) {
    case Backend::Auto: return auto_backend(opt, q);
    case Backend::Reference: return Backend::Reference;
    case Backend::Sdpa:
      if (opt.want_distance)
        throw Error("attention back end 'sdpa' cannot report attention distance", "attention.backend",
                    "use attention.backend: auto, fused or reference when distance is measured");
      return Backend::Sdpa;
    case Backend::Fused:
      if (auto why = fused_unsupported_reason(q, opt.dropout_p); !why.empty())
        throw Error("attention back end 'fused' cannot run: " + why, "attention.backend",
                    opt.dropout_p > 0.0 ? "set model.dropout: 0, or use attention.backend: auto, sdpa or reference"
                                        : "use attention.backend: auto, sdpa or reference");
      return Backend::Fused;
    case Backend::Cuda: {
#ifdef PRISM_WITH_CUDA
      std::string why;
      if (!cuda_attention_supports(q, opt.dropout_p, &why))
        throw Error(fmt::format("attention back end 'cuda' cannot run these inputs: {}", why), "attention.backend",
                    "use attention.backend: auto (falls back to sdpa) or sdpa");
      return Backend::Cuda;
#else
      break;
#endif
    }
  }
  throw Error(fmt::format("attention back end '{}' is not in this build", backend_name(opt.backend)), "attention.backend",
              "rebuild with a CUDA LibTorch and nvcc (PRISM_CUDA=ON), or use attention.backend: auto, reference, sdpa or fused");
}

Output causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const Options& opt) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              "causal_attention: q, k, v must all be (B, T, H, D); got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  switch (resolve_backend(opt, q)) {
    case Backend::Fused: {
      FusedOptions f;
      f.want_distance = opt.want_distance;
      return fused_attention(q, k, v, f);
    }
    case Backend::Sdpa: return sdpa_attention(q, k, v, opt.dropout_p);
#ifdef PRISM_WITH_CUDA
    case Backend::Cuda: return cuda_causal_attention(q, k, v, opt.want_distance);
#endif
    default: return reference_attention(q, k, v, opt.dropout_p, opt.want_distance);
  }
}

}  // namespace prism::attention
