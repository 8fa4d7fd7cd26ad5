#include "prism/ops/bias_gelu.h"

#include <ATen/record_function.h>

#include "cpu/bias_gelu.h"
#include "prism/ops/cpu_isa.h"
#include "prism/ops/kernel_rows.h"

namespace prism {

namespace {

namespace kc = prism::kernels::cpu;
namespace F = torch::nn::functional;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// gelu(h + bias); a bias of no elements stands for none (autograd functions take no
// undefined tensors).
struct BiasGelu : public torch::autograd::Function<BiasGelu> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& h_in, const torch::Tensor& bias_in) {
    RECORD_FUNCTION("prism::bias_gelu", std::vector<c10::IValue>());
    auto h = h_in.contiguous();
    const bool has_bias = bias_in.numel() > 0;
    auto bias = has_bias ? bias_in.to(torch::kFloat).contiguous() : torch::Tensor();
    auto y = torch::empty_like(h, torch::MemoryFormat::Contiguous);
    kc::bias_gelu_forward(contiguous_rows(h), has_bias ? bias.data_ptr<float>() : nullptr, contiguous_rows(y));
    ctx->save_for_backward({h, bias});
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias_in.scalar_type());
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    RECORD_FUNCTION("prism::bias_gelu_backward", std::vector<c10::IValue>());
    const auto saved = ctx->get_saved_variables();
    const auto& h = saved[0];
    const auto& bias = saved[1];
    auto dy = grads[0].to(h.scalar_type()).contiguous();
    auto dh = torch::empty_like(h, torch::MemoryFormat::Contiguous);
    torch::Tensor dbias;
    if (bias.defined() && ctx->needs_input_grad(1))
      dbias = torch::empty({h.size(-1)}, h.options().dtype(torch::kFloat));
    kc::bias_gelu_backward(contiguous_rows(dy), contiguous_rows(h), bias.defined() ? bias.data_ptr<float>() : nullptr,
                           contiguous_rows(dh), dbias.defined() ? dbias.data_ptr<float>() : nullptr);
    if (dbias.defined()) dbias = dbias.to(static_cast<torch::ScalarType>(ctx->saved_data["bias_dtype"].toInt()));
    return {dh, dbias};
  }
};

}  // namespace

bool fused_bias_gelu_fits(const torch::Tensor& h, const torch::Tensor& bias) {
  const auto t = h.scalar_type();
  if (!h.device().is_cpu() || (t != torch::kFloat && t != torch::kBFloat16) || h.dim() < 1) return false;
  if (!bias.defined()) return true;
  const auto bt = bias.scalar_type();
  return bias.device().is_cpu() && bias.dim() == 1 && bias.size(0) == h.size(-1) &&
         (bt == torch::kFloat || bt == torch::kBFloat16);
}

torch::Tensor fused_bias_gelu(const torch::Tensor& h, const torch::Tensor& bias) {
  TORCH_CHECK(fused_bias_gelu_fits(h, bias), "fused_bias_gelu: needs a CPU fp32/bf16 tensor and a matching bias");
  check_cpu_isa_env();
  return BiasGelu::apply(h, bias.defined() ? bias : torch::empty({0}));
}

torch::Tensor linear_gelu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const auto tanh_form = F::GELUFuncOptions().approximate("tanh");
  if (!x.device().is_cpu()) return F::gelu(torch::linear(x, weight, bias), tanh_form);
  // Under autocast the bias-free linear is a bf16 matmul, as it is with the bias.
  auto h = torch::linear(x, weight);
  if (fused_bias_gelu_fits(h, bias)) return fused_bias_gelu(h, bias);
  return F::gelu(bias.defined() ? h + bias : h, tanh_form);  // fp64, fp16
}

const char* bias_gelu_cpu_target() {
  check_cpu_isa_env();
  return kc::bias_gelu_target();
}

}  // namespace prism
