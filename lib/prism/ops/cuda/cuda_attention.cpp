// Binding of the CUDA attention kernels: checks the tensors, fills the params
// structs of kernels/common (kernel_params.h, shared with the CPU binding), runs on the current stream under a device guard,
// and wraps forward and backward in one autograd Function.
#include "prism/ops/cuda/cuda_attention.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention_cuda.h"
#include "prism/ops/kernel_params.h"
#include "prism/error.h"

namespace prism::attention {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const char* kWhere = "attention back end 'cuda'";
const char* kFix = "check the shapes and dtypes above, or use attention.backend: sdpa";

// The kernels read rows of D contiguous elements that start 16-byte aligned;
// anything else (a misaligned view, an expanded gradient) is copied once.
torch::Tensor kernel_readable(const torch::Tensor& t) {
  const int64_t es = t.element_size();
  bool ok = t.stride(3) == 1 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int d = 0; d < 3; ++d) ok = ok && (t.stride(d) * es) % 16 == 0;
  return ok ? t : t.clone(at::MemoryFormat::Contiguous);
}

void* current_stream(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

struct ForwardResult {
  torch::Tensor out, lse, distance;
};

ForwardResult run_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                          bool want_distance) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  ForwardResult r;
  r.out = torch::empty({B, T, H, D}, q.options());
  r.lse = torch::empty({B, H, T}, q.options().dtype(torch::kFloat));
  if (want_distance) r.distance = torch::empty({B, H, T}, q.options().dtype(torch::kFloat));
  auto p = forward_params(q, k, v, r.out, r.lse, r.distance, scale, kWhere);
  p.stream = current_stream(q);
  run_kernel(kWhere, kFix, [&] { kernels::cuda::attention_forward(p); });
  return r;
}

struct BackwardResult {
  torch::Tensor dq, dk, dv;
};

BackwardResult run_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& dout,
                            double scale) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  BackwardResult r;
  r.dq = torch::empty({B, T, H, D}, q.options());
  r.dk = torch::empty({B, T, H, D}, q.options());
  r.dv = torch::empty({B, T, H, D}, q.options());
  auto delta = torch::empty({B, H, T}, q.options().dtype(torch::kFloat));
  torch::Tensor dq_accum;
  if (q.scalar_type() != torch::kFloat) dq_accum = torch::zeros({B, T, H, D}, q.options().dtype(torch::kFloat));
  auto p = backward_params(q, k, v, out, dout, r.dq, r.dk, r.dv, lse, delta, dq_accum, scale, kWhere);
  p.stream = current_stream(q);
  run_kernel(kWhere, kFix, [&] { kernels::cuda::attention_backward(p); });
  return r;
}

// Outputs: out, then distance when asked for (not differentiable).
class CudaAttentionFunction : public torch::autograd::Function<CudaAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale, bool want_distance) {
    const c10::cuda::CUDAGuard guard(q.device());
    auto qr = kernel_readable(q), kr = kernel_readable(k), vr = kernel_readable(v);
    auto r = run_forward(qr, kr, vr, scale, want_distance);
    ctx->save_for_backward({qr, kr, vr, r.out, r.lse});
    ctx->saved_data["scale"] = scale;
    if (!want_distance) return {r.out};
    ctx->mark_non_differentiable({r.distance});
    return {r.out, r.distance};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto& q = saved[0];
    const c10::cuda::CUDAGuard guard(q.device());
    auto dout = grad_outputs[0].defined() ? kernel_readable(grad_outputs[0].to(q.scalar_type()))
                                          : torch::zeros_like(saved[3]);
    auto r = run_backward(q, saved[1], saved[2], saved[3], saved[4], dout, ctx->saved_data["scale"].toDouble());
    return {r.dq, r.dk, r.dv, torch::Tensor(), torch::Tensor()};
  }
};

void check_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  check_qkv(q, k, v, kWhere);
  if (!q.is_cuda() || k.device() != q.device() || v.device() != q.device())
    throw Error(fmt::format("q, k, v must be on one CUDA device; got {}, {}, {}", q.device().str(),
                            k.device().str(), v.device().str()),
                kWhere, "move the model to a CUDA device, or use attention.backend: auto");
  kernel_dtype(q.scalar_type(), kWhere);
  if (kernels::cuda::padded_head_dim(q.size(3)) == 0)
    throw Error(fmt::format("head dim {} is larger than the largest kernel instance, 256", q.size(3)), kWhere,
                "use more heads (head dim = d_model / heads <= 256), or attention.backend: sdpa");
  if (q.size(0) > kernels::cuda::kMaxBatch || q.size(2) > kernels::cuda::kMaxHeads || q.size(1) > kernels::cuda::kMaxSeqLen)
    throw Error(fmt::format("batch {}, sequence {} and heads {} are past the kernels' limits (batch and heads at most "
                            "65535, sequence below 2^30)",
                            q.size(0), q.size(1), q.size(2)),
                kWhere, "split the batch, or use attention.backend: sdpa");
}

}  // namespace

bool cuda_attention_supports(const torch::Tensor& q, double dropout_p, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (!q.is_cuda()) return no("q is not a CUDA tensor");
  if (dropout_p > 0.0) return no("the CUDA kernel has no attention dropout");
  const auto t = q.scalar_type();
  if (t != torch::kFloat && t != torch::kBFloat16 && t != torch::kHalf)
    return no(fmt::format("dtype {} is not supported", c10::toString(t)));
  if (q.dim() != 4 || kernels::cuda::padded_head_dim(q.size(3)) == 0)
    return no("head dim must be at most 256");
  if (q.size(0) > kernels::cuda::kMaxBatch || q.size(2) > kernels::cuda::kMaxHeads)
    return no("batch and heads must each be at most 65535 (the kernels' grid limits)");
  if (q.size(1) > kernels::cuda::kMaxSeqLen) return no("sequence length must be below 2^30");
  return true;
}

Output cuda_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             bool want_distance) {
  check_inputs(q, k, v);
  const int64_t D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const int64_t Dp = kernels::cuda::padded_head_dim(D);
  Output res;
  if (Dp == D) {
    auto outs = CudaAttentionFunction::apply(q, k, v, scale, want_distance);
    res.out = outs[0];
    if (want_distance) res.distance = outs[1];
    return res;
  }
  // Zero columns change no dot product and add zero output columns: pad, run, slice.
  auto pad = [&](const torch::Tensor& t) { return torch::constant_pad_nd(t, {0, Dp - D}); };
  auto outs = CudaAttentionFunction::apply(pad(q), pad(k), pad(v), scale, want_distance);
  res.out = outs[0].narrow(3, 0, D);
  if (want_distance) res.distance = outs[1];
  return res;
}

}  // namespace prism::attention
