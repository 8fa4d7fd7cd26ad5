#pragma once
// The runs a study report reads: from any number of sweep directories, every
// trial whose full-budget run completed (the last rung under halving), read
// from its run.h5, grouped by scale (the model's shape) and, within a scale, by
// configuration: the schedule and everything else its resolved config sets,
// seeds pooled. Two runs are one configuration only when their resolved configs
// agree on every key but the seed and the schedule (and the keys that do not
// change what is trained or measured: train.threads, train.log_every,
// train.checkpoint_every). Where a scale's runs differ in other keys (a grid
// axis such as train.lr, or two sweeps with different fixed settings), each
// configuration's `settings` names its values of those keys, so different
// experiments are never pooled and a schedule is compared only with the uniform
// configuration of the same settings. The same configuration and seed in two
// sweeps (a search and the grid that copies its runs) is one run: the first
// sweep named keeps it, and a note counts them and names any whose final loss
// differs (another build trained it).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prism/analysis/distance_profile.h"
#include "prism/train/position_loss.h"
#include "prism/store/run_store.h"

namespace prism {

struct StudyEval {
  std::string task;
  double acc = 0, acc_norm = 0, acc_stderr = 0, acc_norm_stderr = 0;  // NaN when missing
  int64_t n = 0;
  // Per item (empty in files without them): its line in the task file, and
  // whether the acc_norm prediction was right.
  std::vector<int64_t> item_line;
  std::vector<bool> right_norm;
};

struct StudyRun {
  std::string name;            // the trial's name
  std::string sweep;           // its sweep directory
  std::string run_dir;
  std::vector<int> heads;
  bool uniform = false;
  uint64_t seed = 0;
  // The resolved config, flattened ("train.lr" -> "0.002"), without the seed,
  // the schedule and the keys that do not change the results.
  std::map<std::string, std::string> experiment;
  std::string settings;        // its values of the keys its scale's runs differ in, "key=value, ..." ("" for none)
  int64_t max_steps = 0;
  std::vector<ValRow> val;     // the validation curve
  int64_t steps = 0, tokens = 0;
  double unigram = 0;          // the data's unigram baseline (NaN: unknown)
  // The model's parameter count (0: unknown): the tensors of its newest
  // checkpoint, else its config with the data's vocabulary (`parameters_from` says which).
  int64_t parameters = 0;
  std::string parameters_from;
  int64_t vocab_size = 0;      // the model's vocabulary (0: unknown)
  std::vector<StudyEval> evals;
  std::optional<DistanceProfile> profile;  // /attention/heldout
  std::optional<PositionLoss> by_position;  // /val/by_position at the context it trained on

  double final_val() const;
  double final_val_se() const;
};

struct StudyConfig {
  std::string schedule;        // "uniform" or the compact form
  std::vector<int> heads;
  bool uniform = false;
  std::string settings;        // as its runs' (the keys the scale's runs differ in)
  std::vector<const StudyRun*> runs;  // by seed
  std::string label() const;   // schedule, with the settings when there are any
  int64_t max_steps() const;   // its runs' (one value: it is part of the configuration)
  double unigram() const;      // its runs' unigram baseline (NaN: unknown, or they differ)
  int64_t parameters() const;  // its runs' parameter count (0: unknown, or they differ)
};

struct StudyScale {
  std::string label;           // the model preset, else "L x d"
  int n_layer = 0, d_model = 0, n_head = 0;
  std::vector<std::string> sweeps;
  std::vector<StudyConfig> configs;  // uniform ones first, then by settings and schedule
  std::vector<double> unigrams;      // distinct known unigram baselines of its runs
  std::vector<std::string> varying;  // the config keys its runs differ in (besides seed and schedule)
  // The uniform configuration a Prism one compares with: same settings (nullptr: none).
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

// The keys of a resolved config (config.h's to_yaml text) that make up an
// experiment, flattened: every key but train.seed, the schedule section and
// train.threads, train.log_every, train.checkpoint_every.
std::map<std::string, std::string> experiment_keys(const std::string& resolved_yaml);

// Throws prism::Error for a path that is not a sweep directory, or when no trial
// of any has completed its full budget.
Study load_study(const std::vector<std::string>& sweep_dirs);

// Groups loaded runs into scales and configurations (what load_study does after
// reading them); `shapes` holds each run's scale: label, n_layer, d_model, n_head.
struct RunShape {
  std::string label;
  int n_layer = 0, d_model = 0, n_head = 0;
};
void group_study(Study& study, const std::vector<RunShape>& shapes);

}  // namespace prism
