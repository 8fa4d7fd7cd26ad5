#pragma once
// The sweep index: one row per trial (summary.csv, sweep.h5 /trials), the
// halving decisions (/halving, halving.csv), and the ranked table of
// configurations (schedule and other grid values, seeds pooled; ranking.txt,
// /ranking), each row compared with the uniform baseline of the same other
// values. Rebuilt from the run directories at any time, so it is never stale
// for long and a crashed runner loses nothing but a refresh.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/sweep/halving.h"
#include "prism/sweep/plan.h"

namespace prism {

struct TrialOutcome {
  const Trial* trial = nullptr;
  int rung = 0;                  // the highest rung it ran (0 without halving)
  int64_t budget_steps = 0;      // that rung's budget
  std::string status;            // completed | pruned | failed | interrupted | running | pending
  std::string message;
  std::string run_dir;           // relative to the sweep directory
  int64_t steps = 0, tokens = 0;
  double best_val = 0, final_val = 0;  // NaN when there is none
  double final_val_se = 0;       // final_val's standard error over the validation batches (NaN: unknown)
  double unigram = 0;            // the data's unigram baseline, nats (NaN: unknown)
  std::string dtype;             // what its run trained in: fp32 | bf16 ("": not run, or unknown)
  double wall_s = 0;             // of that run
  int64_t tokens_all = 0;        // over every rung it ran
  double wall_all = 0;
};

// Reads every trial's run(s); `decisions` marks trials that halving stopped.
std::vector<TrialOutcome> collect_outcomes(const SweepPlan& plan, const std::string& sweep_dir,
                                           const std::vector<PromotionDecision>& decisions);

struct RankRow {
  std::string group;
  std::string schedule;                 // "uniform" or the compact form
  std::vector<std::string> params;      // values of the other (non-seed) grid keys, in plan.axes order
  bool baseline = false;
  int seeds_done = 0, seeds_total = 0;
  double mean = 0, std = 0;             // final validation loss over seeds (std NaN below 2 seeds)
  double diff_to_baseline = 0;          // mean - the baseline's mean (NaN without a baseline)
};

// Configurations whose runs at the full budget finished, best first.
std::vector<RankRow> rank_configurations(const SweepPlan& plan, const std::vector<TrialOutcome>& outcomes);

// The grid keys shown as columns of the ranking (not the schedule, not the seed).
std::vector<std::string> param_columns(const SweepPlan& plan);

std::string format_ranking(const SweepPlan& plan, const std::vector<RankRow>& rows,
                           const std::vector<TrialOutcome>& outcomes);

// "unigram baseline ...; validation SE ..." under the ranked table: what the
// losses compare with (NaN values are said to be unknown).
std::string format_baselines(const std::vector<TrialOutcome>& outcomes);

// Writes summary.csv, ranking.txt, halving.csv (with halving) and sweep.h5, each
// through a temporary file and a rename.
void write_index(const SweepPlan& plan, const std::string& sweep_dir, const std::vector<TrialOutcome>& outcomes,
                 const std::vector<RankRow>& rows, const std::vector<PromotionDecision>& decisions);

}  // namespace prism
