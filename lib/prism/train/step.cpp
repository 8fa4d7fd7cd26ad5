#include "prism/train/step.h"

#include <ATen/record_function.h>

#include <cmath>

namespace prism {

bool StepResult::diverged() const { return !std::isfinite(loss) || !std::isfinite(grad_norm); }

StepResult optimizer_step(GPT& model, torch::optim::Optimizer& opt, const Execution& exec, const BatchSource& next,
                          int64_t accum, double grad_clip, GradientSync* sync) {
  opt.zero_grad(true);
  model->train();
  auto loss_sum = torch::zeros({}, torch::dtype(torch::kFloat).device(exec.device));
  for (int64_t m = 0; m < accum; ++m) {
    auto [x, y] = next();
    x = x.to(exec.device, true);
    y = y.to(exec.device, true);
    torch::Tensor loss;
    {
      AutocastScope autocast(exec);
      loss = model->forward(x, y).loss;
    }
    if (sync) sync->prepare(m + 1 == accum);
    (loss / static_cast<double>(accum)).backward();
    loss_sum += loss.detach();
  }
  StepResult r;
  r.loss = loss_sum.item<double>() / static_cast<double>(accum);
  if (sync) {
    sync->finish();
    r.loss = sync->group().mean(r.loss);
  }
  if (!std::isfinite(r.loss)) {
    r.grad_norm = std::nan("");
    return r;
  }
  RECORD_USER_SCOPE("prism::optimizer");  // clipping and AdamW: the op profile's optimizer category
  // clip_grad_norm_ returns the norm before clipping; a huge max_norm only measures it.
  r.grad_norm = torch::nn::utils::clip_grad_norm_(model->parameters(), grad_clip > 0 ? grad_clip : 1e30);
  if (!std::isfinite(r.grad_norm)) return r;  // overflowed gradients: keep the last good weights
  opt.step();
  return r;
}

}  // namespace prism
