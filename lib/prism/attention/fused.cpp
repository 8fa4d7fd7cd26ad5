#include "prism/attention/fused.h"

#include <fmt/format.h>

#include "prism/error.h"

namespace prism::attention {

namespace {

namespace kc = kernels::cpu;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::Strides strides_of(const torch::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }
kernels::DType dtype_of(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? kernels::DType::BF16 : kernels::DType::F32;
}
// The kernel reads any (B, T, H) strides but needs unit stride along D.
torch::Tensor unit_d_stride(const torch::Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); }
torch::Tensor workspace(std::size_t bytes) {
  // LibTorch's CPU allocator aligns to 64 bytes, as the kernel expects.
  return torch::empty({static_cast<int64_t>(bytes)}, torch::dtype(torch::kUInt8));
}

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               bool want_distance, int64_t isa, int64_t threads) {
    q = unit_d_stride(q);
    k = unit_d_stride(k);
    v = unit_d_stride(v);
    const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
    auto out = torch::empty({B, T, H, D}, q.options());
    auto lse = torch::empty({B, H, T}, q.options().dtype(torch::kFloat));
    torch::Tensor distance = want_distance ? torch::empty({B, H, T}, q.options().dtype(torch::kFloat)) : torch::Tensor();

    kernels::AttentionForwardParams p;
    p.q = q.data_ptr();
    p.k = k.data_ptr();
    p.v = v.data_ptr();
    p.o = out.data_ptr();
    p.q_stride = strides_of(q);
    p.k_stride = strides_of(k);
    p.v_stride = strides_of(v);
    p.o_stride = strides_of(out);
    p.lse = lse.data_ptr<float>();
    p.distance = want_distance ? distance.data_ptr<float>() : nullptr;
    p.batch = B;
    p.seq_len = T;
    p.heads = H;
    p.head_dim = D;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    p.dtype = dtype_of(q);
    kc::Launch launch{static_cast<int>(threads), static_cast<kc::Isa>(isa), nullptr};
    auto ws = workspace(kc::forward_workspace_bytes(p, launch.num_threads, launch.isa));
    launch.workspace = ws.data_ptr();
    kc::attention_forward(p, launch);

    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["isa"] = isa;
    ctx->saved_data["threads"] = threads;
    if (!want_distance) return {out};
    ctx->mark_non_differentiable({distance});
    return {out, distance};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
    torch::Tensor dout = grads[0].defined() ? unit_d_stride(grads[0].to(q.scalar_type())) : torch::zeros_like(out);
    auto dq = torch::empty({B, T, H, D}, q.options());
    auto dk = torch::empty({B, T, H, D}, q.options());
    auto dv = torch::empty({B, T, H, D}, q.options());

    kernels::AttentionBackwardParams p;
    p.q = q.data_ptr();
    p.k = k.data_ptr();
    p.v = v.data_ptr();
    p.o = out.data_ptr();
    p.dout = dout.data_ptr();
    p.dq = dq.data_ptr();
    p.dk = dk.data_ptr();
    p.dv = dv.data_ptr();
    p.q_stride = strides_of(q);
    p.k_stride = strides_of(k);
    p.v_stride = strides_of(v);
    p.o_stride = strides_of(out);
    p.dout_stride = strides_of(dout);
    p.dq_stride = strides_of(dq);
    p.dk_stride = strides_of(dk);
    p.dv_stride = strides_of(dv);
    p.lse = lse.data_ptr<float>();
    p.batch = B;
    p.seq_len = T;
    p.heads = H;
    p.head_dim = D;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    p.dtype = dtype_of(q);
    kc::Launch launch{static_cast<int>(ctx->saved_data["threads"].toInt()),
                      static_cast<kc::Isa>(ctx->saved_data["isa"].toInt()), nullptr};
    auto ws = workspace(kc::backward_workspace_bytes(p, launch.num_threads, launch.isa));
    launch.workspace = ws.data_ptr();
    kc::attention_backward(p, launch);
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::string fused_unsupported_reason(const torch::Tensor& q, double dropout_p) {
  if (!q.device().is_cpu()) return fmt::format("it runs on the CPU and the inputs are on {}", q.device().str());
  if (q.scalar_type() != torch::kFloat && q.scalar_type() != torch::kBFloat16)
    return fmt::format("it takes float32 or bfloat16 inputs, not {}", c10::toString(q.scalar_type()));
  if (dropout_p > 0.0) return fmt::format("it has no dropout on attention probabilities (dropout {})", dropout_p);
  return {};
}

Output fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const FusedOptions& opt) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              "fused_attention: q, k, v must all be (B, T, H, D); got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "fused_attention: q, k, v must have one dtype");
  if (auto why = fused_unsupported_reason(q, 0.0); !why.empty())
    throw Error("the fused attention kernel cannot run: " + why, "attention.backend",
                "use attention.backend: auto, sdpa or reference");
  if (!kc::isa_supported(opt.isa))
    throw Error(fmt::format("this CPU lacks the {} instructions the kernel was asked to use", kc::isa_name(opt.isa)),
                "fused attention", "use the default instruction set (kernels::cpu::best_isa())");
  const int threads = opt.num_threads > 0 ? opt.num_threads : torch::get_num_threads();
  auto res = FusedAttentionFunction::apply(q, k, v, opt.want_distance, static_cast<int64_t>(opt.isa),
                                           static_cast<int64_t>(threads));
  Output o;
  o.out = res[0];
  if (opt.want_distance) o.distance = res[1];
  return o;
}

}  // namespace prism::attention
