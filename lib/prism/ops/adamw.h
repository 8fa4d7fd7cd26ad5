#pragma once
// The AdamW kernel (kernels/cpu/adamw.h) on tensors, for FusedAdamW's parameters
// that have bf16 working copies (prism/train/optimizer.h): one step of an fp32
// master weight, its moments and its copy in one pass, and a bf16 gradient's
// share of the clipping norm (prism/train/step.h).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace prism {

struct AdamWHyperparameters {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;         // this step's count, already incremented (>= 1)
  double grad_scale = 1.0;  // the gradient is divided by it (clipping)
};

// One AdamW step: `param` (fp32, contiguous CPU) and its moments `exp_avg` and
// `exp_avg_sq` (fp32, param's shape) in place, and `copy` (bf16, param's shape)
// written from the new weight. `grad`: bf16 or fp32, param's shape, contiguous;
// `extra_rows`: empty, or per row of `grad` (as a (rows, grad.size(1)) matrix) the
// fp32 values to add to it, or null (the token embedding's sparse rows).
void adamw_step_with_copy(const torch::Tensor& param, const torch::Tensor& grad,
                          const std::vector<const float*>& extra_rows, const torch::Tensor& exp_avg,
                          const torch::Tensor& exp_avg_sq, const torch::Tensor& copy, const AdamWHyperparameters& h);

// The sum of the squares of a bf16 gradient plus its extra rows (as above), in
// an order that does not depend on the thread count.
double bf16_sum_squares(const torch::Tensor& grad, const std::vector<const float*>& extra_rows);

// The Highway target the kernel runs on here ("AVX3_ZEN4", "AVX2", ...).
const char* adamw_cpu_target();

}  // namespace prism
