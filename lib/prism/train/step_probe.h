#pragma once
// A training step timed here, on random tokens: what a sweep's dry run rests its ETA
// on, instead of assuming a throughput (the dtype `auto` resolves to, the threads a
// trial gets and this CPU's kernels are all in the figure). Shared with `prism bench`.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "prism/config/config.h"
#include "prism/train/step.h"

namespace prism {

// Batches of uniformly random tokens (inputs and targets), B x T, from their own generator.
BatchSource random_token_batches(int64_t vocab_size, int64_t B, int64_t T, uint64_t seed);

struct StepTiming {
  double seconds = 0;      // per optimizer step (the best of the timed steps)
  int timed = 0;           // steps timed, after one warm-up step
  std::string execution;   // Execution::describe(): device, threads, dtype
  std::string dtype_reason;
};

// Builds the config's model and optimizer on its device at its threads and dtype
// (train.threads and train.dtype as the trainer resolves them), and times `steps`
// optimizer steps of its batch (train.batch_size x seq_len, with its gradient
// accumulation for train.tokens_per_step) after one warm-up step. A warm-up step
// slower than `budget_s` is the figure (one step of a large model is enough to know).
StepTiming time_training_steps(const Config& c, int steps = 2, double budget_s = 5);

// One model in training on random tokens (B x T), stepped by the caller: an arm of the
// benchmarks (`prism bench train`, the study report's throughput). Its weights and batches
// come from fixed seeds, on the CPU at LibTorch's current thread count.
class TrainingArm {
 public:
  TrainingArm(const ModelConfig& mc, const HeadSchedule& s, const std::string& backend, bool bf16, int64_t B, int64_t T);
  double step();  // one optimizer step on the next batch; its loss
  GPT& model() { return model_; }

 private:
  GPT model_;
  Execution exec_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  BatchSource next_;
};

// "<CPU model>, N intra-op threads, LibTorch X (CPU)": the machine line every bench prints.
std::string bench_machine();

}  // namespace prism
