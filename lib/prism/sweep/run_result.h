#pragma once
// What a sweep needs from a run's run.h5: its status and validation curve,
// read through the store's RunReader (SWMR read mode, no lock), so it works on
// a finished run, on one left by a killed trainer, and while a trainer still
// writes it.
#include <cstdint>
#include <string>
#include <vector>

namespace prism {

struct RunResult {
  std::string status;              // running | completed | interrupted | failed
  std::vector<int> heads;
  uint64_t seed = 0;
  int64_t steps = 0, tokens = 0;   // the last training row
  double train_time_s = 0;         // training time of the last row
  std::vector<int64_t> val_steps, val_tokens;
  std::vector<double> val_loss;
  std::vector<double> val_loss_se;  // standard error of each over the validation batches (NaN if unknown)
  double unigram_val_loss = 0;      // the data's unigram baseline (NaN if unknown)
  std::string dtype;                // what it trained in: fp32 | bf16 ("" unknown: an older `auto` run)
  double best_val_loss() const;    // NaN without validation rows
  double final_val_loss() const;
  double final_val_loss_se() const;
};

// Throws prism::Error naming the file if it is missing or cannot be read.
RunResult read_run_result(const std::string& run_h5);

}  // namespace prism
