#include "prism/ops/attention.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include "prism/ops/cpu_code_paths.h"
#include "prism/ops/attention_fused.h"
#include "prism/ops/kernel_params.h"
#include "prism/error.h"
#ifdef PRISM_WITH_CUDA
#include "prism/ops/cuda/cuda_attention.h"
#endif

namespace prism::attention {

namespace {

// The fused kernel on every CPU code path where `prism bench attention`
// measured it at or under SDPA's time and at most half the reference's, at
// T 1024 and 4096 and head dims 64-256 (README, "Attention back ends"; the
// paths are listed in cpu_code_paths.cpp): AVX2 + FMA, AVX-512,
// AVX-512-BF16 and AMX. It is also the only O(T)-memory source of distance. Other
// code paths (NEON/SVE, not measured yet; the portable baseline) leave auto
// on SDPA.
Backend auto_backend(const Options& opt, const torch::Tensor& q) {
#ifdef PRISM_WITH_CUDA
  // The CUDA kernel covers fp32/bf16/fp16, head dims up to 256, no dropout; it reports distance too.
  if (q.is_cuda() && cuda_attention_supports(q, opt.dropout_p)) return Backend::Cuda;
#endif
  if (fused_unsupported_reason(q, opt.dropout_p).empty() && default_cpu_code_path().auto_eligible)
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
  RECORD_USER_SCOPE("prism::attention");  // the op profile's attention category (train/op_profile.h)
  check_qkv(q, k, v, "causal_attention");
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
