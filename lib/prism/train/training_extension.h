#pragma once
// TrainingExtension: what a run adds to plain training, carried by the trainer
// through everything else it does (data parallelism, checkpoints and exact
// resume after a kill, run.h5 written as it goes, signals, progress lines).
// A weight-sharing schedule search (search/) is one: every micro-batch runs
// under heads of its choosing, it may train tensors of its own (architecture
// weights), it records its state per step, and it ranks the schedules once the
// shared weights are trained. Plain training has none.
//
// Data parallelism: every rank holds an extension with the same state and makes
// the same calls in the same order (the trainer's collectives depend on it);
// rank 0 alone is given the run store.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prism/model/gpt.h"
#include "prism/store/run_store.h"
#include "prism/train/checkpoint.h"
#include "prism/train/execution.h"

namespace prism {

// The loss of the model on the first `batches` of the run's fixed held-out
// batches (0: all of the validation set) under `options`, with its standard
// error over batches. Data-parallel, the batches are split among the ranks and
// every rank must make the same call.
using HeldOutLoss = std::function<ValRow(const ForwardOptions& options, int64_t batches)>;

class TrainingExtension {
 public:
  virtual ~TrainingExtension() = default;

  // One line for the run's start ("search: spos over 3125 schedules ...").
  virtual std::string describe() const = 0;
  // The /search series of run.h5 (created with the run), for `slots` micro-batches per step over all ranks.
  virtual SearchLayout store_layout(int64_t slots) const = 0;
  // The model is built, on the run's device: make the extension's own tensors there.
  virtual void attach(GPT& model, const Execution& exec) = 0;
  // Tensors trained by the extension from the loss: their gradients are averaged
  // over ranks as the model's are, and left for after_step to use and clear.
  virtual std::vector<torch::Tensor> parameters() = 0;
  // The forward options of micro-batch `slot` of `slots` at optimizer step `step`
  // (0-based). Slots number every micro-batch of the step on every rank as one
  // process with the same global batch reads them, so a data-parallel run makes
  // the same choices as a single process.
  virtual ForwardOptions micro_batch(int64_t step, int64_t slot, int64_t slots) = 0;
  // The options of the trainer's own validation passes (/val).
  virtual ForwardOptions validation() const = 0;
  // After optimizer step `step` (1-based: steps done) was applied.
  virtual void after_step(int64_t step, RunStore* store) = 0;
  // At the validation cadence, after the trainer's validation.
  virtual void measure(int64_t step, const HeldOutLoss& loss, RunStore* store) = 0;
  // Saved in every checkpoint, and restored from it on resume.
  virtual CheckpointExtra state() const = 0;
  virtual void restore(const CheckpointExtra& state) = 0;
  // Once training has reached train.max_steps (again when a finished run is
  // resumed): the extension's results. `root`: rank 0, which writes files.
  virtual void finish(const HeldOutLoss& loss, RunStore* store, const std::string& run_dir, bool root) = 0;
};

}  // namespace prism
