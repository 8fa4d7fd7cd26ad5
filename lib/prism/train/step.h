#pragma once
// One optimizer step: gradient accumulation over micro-batches (autocast as the
// execution says), clipping, AdamW. Shared by the trainer and `prism bench train`.
// Data-parallel: with a GradientSync, the last micro-step's backward averages
// the gradients over the ranks and the loss is the mean over ranks, so every
// rank takes the same decision and the same step.
#include <torch/torch.h>

#include <functional>
#include <utility>

#include "prism/model/gpt.h"
#include "prism/train/distributed.h"
#include "prism/train/execution.h"

namespace prism {

using BatchSource = std::function<std::pair<torch::Tensor, torch::Tensor>()>;
// The forward options of micro-batch m (0-based) of this step; unset: the defaults.
using MicroBatchOptions = std::function<ForwardOptions(int64_t m)>;

struct StepResult {
  double loss = 0;       // mean over micro-batches (NaN/inf if training diverged)
  double grad_norm = 0;  // before clipping (NaN if not computed)
  bool diverged() const;
};

// Whether optimizer_step trains on bf16 working copies of the matmul weights
// (prism/model/working_copies.h): bf16 on the CPU with our fused AdamW.
bool trains_on_working_copies(const torch::optim::Optimizer& opt, const Execution& exec);

// Runs forward/backward on `accum` micro-batches and, if the loss and the
// gradient norm are finite, clips to `grad_clip` (0: no clipping) and steps the
// optimizer. Otherwise the optimizer is not stepped, so the weights stay the
// last good ones; callers check both numbers.
// `options` gives each micro-batch's forward options (a schedule search runs each
// under its own heads); tensors other than the model's that the loss depends on
// (architecture weights) get their gradients too, and are left to their owner.
StepResult optimizer_step(GPT& model, torch::optim::Optimizer& opt, const Execution& exec, const BatchSource& next,
                          int64_t accum, double grad_clip, GradientSync* sync = nullptr,
                          const MicroBatchOptions& options = nullptr);

}  // namespace prism
