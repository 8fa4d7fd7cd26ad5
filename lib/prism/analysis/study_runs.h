#pragma once
// The runs a study report reads: from any number of sweep directories, every
// trial whose full-budget run completed (the last rung under halving), read
// from its run.h5, grouped by scale (the model's shape) and, within a scale, by
// configuration (the schedule and the other grid values; seeds pooled). The
// same configuration and seed in two sweeps (a search and a seeds sweep, say)
// is one run: the first sweep named keeps it, and a note says so.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "prism/analysis/distance_profile.h"
#include "prism/store/run_store.h"

namespace prism {

struct StudyEval {
  std::string task;
  double acc = 0, acc_norm = 0, acc_stderr = 0, acc_norm_stderr = 0;  // NaN when missing
  int64_t n = 0;
};

struct StudyRun {
  std::string name;            // the trial's name
  std::string sweep;           // its sweep directory
  std::string run_dir;
  std::vector<int> heads;
  bool uniform = false;
  uint64_t seed = 0;
  std::string params;          // its other grid values, "key=value, ..." ("" for none)
  int64_t max_steps = 0;
  std::vector<ValRow> val;     // the validation curve
  int64_t steps = 0, tokens = 0;
  double train_time_s = 0;     // training time of the last /train row (no validation or checkpoints)
  double unigram = 0;          // the data's unigram baseline (NaN: unknown)
  std::vector<StudyEval> evals;
  std::optional<DistanceProfile> profile;  // /attention/heldout

  double final_val() const;
  double final_val_se() const;
  double tokens_per_s() const;
};

struct StudyConfig {
  std::string schedule;        // "uniform" or the compact form
  std::vector<int> heads;
  bool uniform = false;
  std::string params;
  std::vector<const StudyRun*> runs;  // by seed
  std::string label() const;   // schedule, with the params when there are any
};

struct StudyScale {
  std::string label;           // the model preset, else "L x d"
  int n_layer = 0, d_model = 0, n_head = 0;
  int64_t parameters = 0;      // the model's (LM head tied, position table included)
  std::vector<std::string> sweeps;
  std::vector<StudyConfig> configs;  // uniform ones first, then by schedule
  std::vector<double> unigrams;      // distinct known unigram baselines of its runs
  // The uniform configuration a Prism one compares with: same params (nullptr: none).
  const StudyConfig* baseline_of(const StudyConfig& c) const;
};

// Configurations point into `runs`: a Study moves, it is never copied.
struct Study {
  Study() = default;
  Study(const Study&) = delete;
  Study& operator=(const Study&) = delete;
  Study(Study&&) = default;
  Study& operator=(Study&&) = default;

  std::vector<std::string> sweeps;
  std::vector<StudyRun> runs;
  std::vector<StudyScale> scales;
  std::vector<std::string> notes;  // trials left out and why
};

// Throws prism::Error for a path that is not a sweep directory, or when no trial
// of any has completed its full budget.
Study load_study(const std::vector<std::string>& sweep_dirs);

}  // namespace prism
