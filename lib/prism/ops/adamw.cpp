#include "prism/ops/adamw.h"

#include "cpu/adamw.h"
#include "prism/ops/cpu_isa.h"

namespace prism {

namespace {

kernels::cpu::ExtraRows extra_of(const torch::Tensor& grad, const std::vector<const float*>& rows) {
  kernels::cpu::ExtraRows extra;
  if (!rows.empty()) extra = {grad.size(1), rows.data()};
  return extra;
}

}  // namespace

void adamw_step_with_copy(const torch::Tensor& param, const torch::Tensor& grad,
                          const std::vector<const float*>& extra_rows, const torch::Tensor& exp_avg,
                          const torch::Tensor& exp_avg_sq, const torch::Tensor& copy, const AdamWHyperparameters& h) {
  kernels::cpu::AdamWTensor t;
  t.param = param.data_ptr<float>();
  if (grad.scalar_type() == torch::kBFloat16) t.grad_bf16 = reinterpret_cast<const uint16_t*>(grad.data_ptr());
  else t.grad_f32 = grad.data_ptr<float>();
  t.extra = extra_of(grad, extra_rows);
  t.exp_avg = exp_avg.data_ptr<float>();
  t.exp_avg_sq = exp_avg_sq.data_ptr<float>();
  t.copy_bf16 = reinterpret_cast<uint16_t*>(copy.data_ptr());
  t.n = param.numel();
  kernels::cpu::AdamWHyper k;
  k.lr = h.lr;
  k.beta1 = h.beta1;
  k.beta2 = h.beta2;
  k.eps = h.eps;
  k.weight_decay = h.weight_decay;
  k.step = h.step;
  k.grad_scale = h.grad_scale;
  kernels::cpu::adamw_step(t, k);
}

double bf16_sum_squares(const torch::Tensor& grad, const std::vector<const float*>& extra_rows) {
  return kernels::cpu::sum_squares_bf16(reinterpret_cast<const uint16_t*>(grad.data_ptr()), grad.numel(),
                                        extra_of(grad, extra_rows));
}

const char* adamw_cpu_target() {
  check_cpu_isa_env();  // PRISM_CPU_ISA holds this kernel too; a bad value is refused with its fix
  return kernels::cpu::adamw_target();
}

}  // namespace prism
