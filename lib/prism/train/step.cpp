#include "prism/train/step.h"

#include <ATen/record_function.h>

#include <cmath>

#include "prism/ops/adamw.h"
#include "prism/train/optimizer.h"

namespace prism {

bool StepResult::diverged() const { return !std::isfinite(loss) || !std::isfinite(grad_norm); }

bool trains_on_working_copies(const torch::optim::Optimizer& opt, const Execution& exec) {
  return dynamic_cast<const FusedAdamW*>(&opt) && exec.bf16 && exec.device.is_cpu();
}

namespace {

// bf16 training on the CPU with our fused AdamW runs on bf16 working copies;
// made on the first step and kept by the optimizer. Data parallelism averages
// their gradients (in fp32, into the masters').
WorkingCopies* working_copies_for(GPT& model, FusedAdamW* fused, const Execution& exec, GradientSync* sync) {
  if (!fused || !trains_on_working_copies(*fused, exec)) return nullptr;
  if (!fused->working_copies()) {
    auto copies = std::make_shared<WorkingCopies>();
    model->add_working_copies(*copies);
    fused->set_working_copies(std::move(copies));
  }
  if (sync) sync->use_working_copies(*fused->working_copies());
  return fused->working_copies();
}

}  // namespace

StepResult optimizer_step(GPT& model, torch::optim::Optimizer& opt, const Execution& exec, const BatchSource& next,
                          int64_t accum, double grad_clip, GradientSync* sync, const MicroBatchOptions& options) {
  auto* fused = dynamic_cast<FusedAdamW*>(&opt);
  WorkingCopies* copies = working_copies_for(model, fused, exec, sync);
  opt.zero_grad(true);
  if (copies) copies->zero_grads();
  model->train();
  auto loss_sum = torch::zeros({}, torch::dtype(torch::kFloat).device(exec.device));
  for (int64_t m = 0; m < accum; ++m) {
    auto [x, y] = next();
    x = x.to(exec.device, true);
    y = y.to(exec.device, true);
    torch::Tensor loss;
    {
      AutocastScope autocast(exec);
      ForwardOptions forward = options ? options(m) : ForwardOptions{};
      forward.working_copies = copies;  // the matmuls read the bf16 copies (null: the masters)
      loss = model->forward(x, y, forward).loss;
    }
    if (sync) sync->prepare(m + 1 == accum);
    (loss / static_cast<double>(accum)).backward();
    // Micro-batches sum in fp32, as under autocast (the communicating one's sum is the sync's).
    if (copies && accum > 1 && !(sync && m + 1 == accum)) copies->fold_grads();
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
  double bf16_squares = 0;  // the bf16 gradients' share, summed by our kernel
  bool any_bf16 = false;
  for (const auto& p : model->parameters()) {
    auto* copy = copies ? copies->entry_of(p) : nullptr;
    const WorkingCopies::StepGrad* cg = copy ? &copies->step_grad(*copy) : nullptr;
    const torch::Tensor g = cg ? cg->dense : p.grad();
    if (!g.defined()) continue;
    if (cg && g.scalar_type() == torch::kBFloat16) {
      // A copy's bf16 gradient and its master's sparse rows. ATen's norm of a bf16
      // tensor rounds its result to bf16, and asked for an fp32 result it converts
      // the whole tensor first.
      bf16_squares += bf16_sum_squares(g, cg->rows);
      any_bf16 = true;
    } else {
      norms.push_back(g.norm(2));
    }
  }
  if (any_bf16) norms.push_back(torch::tensor(static_cast<float>(std::sqrt(bf16_squares))));
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
