#include "prism/ops/add_layer_norm.h"

#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>

#include "cpu/layer_norm.h"
#include "prism/ops/cpu_isa.h"
#include "prism/ops/kernel_rows.h"

namespace prism {

namespace {

namespace kc = prism::kernels::cpu;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dtype the next matmul reads: bf16 under CPU autocast to bf16, else fp32.
torch::ScalarType normed_dtype() {
  if (at::autocast::is_autocast_enabled(torch::kCPU) &&
      at::autocast::get_autocast_dtype(torch::kCPU) == torch::kBFloat16)
    return torch::kBFloat16;
  return torch::kFloat;
}

// Outputs {y} without r, {y, h} with it. A tensor of no elements stands for an
// absent r or bias (autograd functions take no undefined tensors).
struct AddLayerNorm : public torch::autograd::Function<AddLayerNorm> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& r_in,
                               const torch::Tensor& weight, const torch::Tensor& bias, int64_t y_dtype, double eps) {
    RECORD_FUNCTION("prism::add_layer_norm", std::vector<c10::IValue>());
    ctx->set_materialize_grads(false);  // an output nothing reads gets no gradient, not zeros to add
    const bool has_r = r_in.numel() > 0, has_bias = bias.numel() > 0;
    auto x = x_in.contiguous();
    auto r = has_r ? r_in.contiguous() : torch::Tensor();
    auto gamma = weight.contiguous();
    auto beta = has_bias ? bias.contiguous() : torch::Tensor();
    auto h = has_r ? torch::empty_like(x, torch::MemoryFormat::Contiguous) : x;
    auto y = torch::empty(x.sizes(), x.options().dtype(static_cast<torch::ScalarType>(y_dtype)));
    const int64_t rows = x.size(-1) == 0 ? 0 : x.numel() / x.size(-1);
    auto mean = torch::empty({rows}, x.options());
    auto rstd = torch::empty({rows}, x.options());
    const kc::Rows xr = contiguous_rows(x), hr = contiguous_rows(h), rr = has_r ? contiguous_rows(r) : kc::Rows{};
    kc::add_layer_norm_forward(xr, has_r ? &rr : nullptr, has_r ? &hr : nullptr, gamma.data_ptr<float>(),
                               has_bias ? beta.data_ptr<float>() : nullptr, static_cast<float>(eps), contiguous_rows(y),
                               mean.data_ptr<float>(), rstd.data_ptr<float>());
    ctx->save_for_backward({h, gamma, mean, rstd});
    ctx->saved_data["r_dtype"] = static_cast<int64_t>(r_in.scalar_type());
    ctx->saved_data["has_r"] = has_r;
    ctx->saved_data["has_bias"] = has_bias;
    if (!has_r) return {y};
    return {y, h};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    RECORD_FUNCTION("prism::add_layer_norm_backward", std::vector<c10::IValue>());
    const auto saved = ctx->get_saved_variables();
    const auto& h = saved[0];
    const auto& gamma = saved[1];
    const bool has_r = ctx->saved_data["has_r"].toBool(), has_bias = ctx->saved_data["has_bias"].toBool();
    const auto r_dtype = static_cast<torch::ScalarType>(ctx->saved_data["r_dtype"].toInt());
    const torch::Tensor dy = grads[0];
    const torch::Tensor dh = has_r && grads[1].defined() ? grads[1].to(torch::kFloat).contiguous() : torch::Tensor();
    variable_list out(6);
    if (!dy.defined()) {  // only the sum was used: its gradient passes through the add
      if (dh.defined()) {
        out[0] = dh;
        out[1] = dh.to(r_dtype);
      }
      return out;
    }
    auto dyc = dy.scalar_type() == torch::kBFloat16 ? dy.contiguous() : dy.to(torch::kFloat).contiguous();
    auto dx = torch::empty_like(h, torch::MemoryFormat::Contiguous);
    // The branch's gradient: dx itself for an fp32 branch, a bf16 copy written in the same pass for a bf16 one.
    const bool dr_copy = has_r && r_dtype == torch::kBFloat16;
    auto dr = dr_copy ? torch::empty_like(dx, dx.options().dtype(torch::kBFloat16)) : torch::Tensor();
    auto dgamma = ctx->needs_input_grad(2) ? torch::empty_like(gamma) : torch::Tensor();
    auto dbeta = has_bias && ctx->needs_input_grad(3) ? torch::empty_like(gamma) : torch::Tensor();
    const kc::Rows dhr = dh.defined() ? contiguous_rows(dh) : kc::Rows{};
    const kc::Rows drr = dr_copy ? contiguous_rows(dr) : kc::Rows{};
    kc::add_layer_norm_backward(contiguous_rows(dyc), dh.defined() ? &dhr : nullptr, contiguous_rows(h),
                                saved[2].data_ptr<float>(), saved[3].data_ptr<float>(), gamma.data_ptr<float>(),
                                contiguous_rows(dx), dr_copy ? &drr : nullptr,
                                dgamma.defined() ? dgamma.data_ptr<float>() : nullptr,
                                dbeta.defined() ? dbeta.data_ptr<float>() : nullptr);
    out[0] = dx;
    if (has_r) out[1] = dr_copy ? dr : dx;  // the branch is fp32 or bf16 (fused_add_layer_norm_fits)
    out[2] = dgamma;
    out[3] = dbeta;
    return out;
  }
};

}  // namespace

bool fused_add_layer_norm_fits(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat || x.dim() < 1 || x.size(-1) == 0) return false;
  // Under autocast the kernel writes bf16 only: other autocast dtypes (fp16) keep LibTorch's ops.
  if (at::autocast::is_autocast_enabled(torch::kCPU) &&
      at::autocast::get_autocast_dtype(torch::kCPU) != torch::kBFloat16)
    return false;
  const auto fp32_vector = [&](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.dim() == 1 && t.size(0) == x.size(-1);
  };
  if (!weight.defined() || !fp32_vector(weight) || (bias.defined() && !fp32_vector(bias))) return false;
  if (!r.defined()) return true;
  return r.device().is_cpu() && r.sizes() == x.sizes() &&
         (r.scalar_type() == torch::kFloat || r.scalar_type() == torch::kBFloat16);
}

AddNorm add_layer_norm(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& weight,
                       const torch::Tensor& bias, double eps) {
  if (!fused_add_layer_norm_fits(x, r, weight, bias)) {
    auto h = r.defined() ? x + r : x;
    return {h, torch::layer_norm(h, {weight.size(0)}, weight, bias, eps)};
  }
  check_cpu_isa_env();
  const auto none = torch::empty({0}, x.options());
  auto outs = AddLayerNorm::apply(x, r.defined() ? r : none, weight, bias.defined() ? bias : none,
                                  static_cast<int64_t>(normed_dtype()), eps);
  return {r.defined() ? outs[1] : x, outs[0]};
}

const char* layer_norm_cpu_target() {
  check_cpu_isa_env();
  return kc::layer_norm_target();
}

}  // namespace prism
