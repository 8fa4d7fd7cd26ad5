#pragma once
// Trainer: one run from a resolved Config to a complete record. It owns the
// loop (gradient accumulation, clipping, AdamW, warmup + cosine), periodic
// validation and attention-distance measurements, checkpoints, the run store,
// progress lines and the final summary.
#include <functional>
#include <string>

#include "prism/config/config.h"

namespace prism {

class TrainingExtension;

struct TrainOptions {
  std::string run_dir;            // where config.yaml, run.h5 and checkpoints/ live
  bool resume = false;            // continue from the newest checkpoint in run_dir
  bool force = false;             // replace an existing run in run_dir
  std::function<void(const std::string&)> log;  // progress lines (default: stdout)
  // What the run adds to plain training (training_extension.h), e.g. a schedule
  // search; not owned, alive for the call. nullptr: plain training.
  TrainingExtension* extension = nullptr;
};

struct TrainSummary {
  std::string status;             // completed | interrupted | failed
  std::string run_dir;
  int64_t steps = 0, tokens = 0;
  double train_loss = 0, val_loss = 0, best_val_loss = 0;
  int64_t best_val_step = -1;
  double wall_s = 0, tokens_per_s = 0;
  std::string checkpoint;         // newest checkpoint directory
  std::string message;            // why it failed or stopped, if it did
};

// Runs (or resumes) training. Throws prism::Error for bad input found before
// training starts; failures during training (NaN loss, disk full) end the run
// with status "failed" in run.h5 and are reported in the summary.
TrainSummary train(const Config& config, const TrainOptions& options);

// For --resume: the config a run was started with, plus new overrides.
Config load_run_config(const std::string& run_dir, const std::vector<std::string>& overrides);

}  // namespace prism
