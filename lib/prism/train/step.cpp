#include "prism/train/step.h"

#include <ATen/record_function.h>

#include <cmath>

#include "prism/train/optimizer.h"

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
  auto* fused = dynamic_cast<FusedAdamW*>(&opt);
  if (!fused) {
    // clip_grad_norm_ returns the norm before clipping; a huge max_norm only measures it.
    r.grad_norm = torch::nn::utils::clip_grad_norm_(model->parameters(), grad_clip > 0 ? grad_clip : 1e30);
    if (!std::isfinite(r.grad_norm)) return r;  // overflowed gradients: keep the last good weights
    opt.step();
    return r;
  }
  // The fused AdamW clips in its own pass over the gradients (its grad scale),
  // where clip_grad_norm_ would multiply every gradient first, by 1.0 when not
  // clipping. The norm and the coefficient are clip_grad_norm_'s.
  std::vector<torch::Tensor> norms;
  for (const auto& p : model->parameters())
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  if (norms.empty()) {
    opt.step();
    return r;
  }
  const auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  r.grad_norm = total.item<double>();
  if (!std::isfinite(r.grad_norm)) return r;  // overflowed gradients: keep the last good weights
  if (grad_clip > 0) {
    const auto coef = torch::clamp_max(grad_clip / (total + 1e-6), 1.0);
    if (coef.item<double>() < 1.0) fused->set_grad_scale(coef.reciprocal());
  }
  opt.step();
  fused->set_grad_scale(torch::Tensor());
  return r;
}

}  // namespace prism
