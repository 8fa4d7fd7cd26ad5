#pragma once
// Running a sweep: which runs come next (the stage), running them here, and
// collecting the results into the index and the ranked table.
//
// Resume semantics, the same for every launcher: a completed run (its run.h5
// says so) is never rerun; an interrupted one continues from its newest
// checkpoint (started over if it has none); a failed one is retried as the
// RetryPolicy says (sweep_dir.h: by default only a run that failed before it
// trained a step), resumed from its checkpoint or started over. One failing run
// never stops the others, and one invocation tries a failed run at most once.
#include <functional>
#include <string>
#include <vector>

#include "prism/sweep/halving.h"
#include "prism/sweep/index.h"
#include "prism/sweep/local_launcher.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/sweep_dir.h"

namespace prism {

// What to run next, derived from the run directories alone.
struct SweepStage {
  bool finished = false;                   // nothing left to run
  int rung = 0;                            // the rung being run (0 without halving)
  int64_t steps = 0;                       // its budget
  std::vector<const Trial*> trials;        // the trials of this rung (promoted ones)
  std::vector<const Trial*> work;          // those needing a run now
  std::vector<PromotionDecision> decisions;  // of the rungs before
};
SweepStage sweep_stage(const SweepPlan& plan, const std::string& sweep_dir, RetryPolicy retry);

// The runs of a stage, ready for a launcher.
std::vector<TrialRun> stage_runs(const SweepPlan& plan, const std::string& sweep_dir, const SweepStage& stage,
                                 bool only_work);

struct SweepOptions {
  std::string dir;
  int jobs = 0;               // 0: the sweep file's
  int threads = 0;            // threads for all concurrent trials; 0: the sweep file's, else every core
  double timeout_s = -1;      // < 0: the sweep file's
  RetryPolicy retry = RetryPolicy::Untrained;
  bool force = false;
  std::string prism;          // the binary trials run with (default: this one)
  std::function<void(const std::string&)> log;
};

struct SweepSummary {
  int exit_code = 0;          // 0 all done, 1 a trial failed, 130 stopped by a signal
  std::vector<TrialOutcome> outcomes;
  std::vector<RankRow> ranking;
  std::vector<PromotionDecision> decisions;
  std::string table;          // the ranked table and the tallies
  int64_t tokens_trained = 0, tokens_full_grid = 0;
};

// Runs the sweep on this machine (locks the directory, checks it belongs to
// this plan, runs stage after stage, keeps the index current).
SweepSummary run_sweep(const SweepPlan& plan, const SweepOptions& options);

// Rebuilds the index and the table from the run directories.
SweepSummary collect_sweep(const SweepPlan& plan, const std::string& sweep_dir);

// Threads per trial when `jobs` trials share `threads` (0 = every core).
int threads_per_trial(int threads, int jobs);

// "successive halving: ..." lines: budgets, decisions, tokens against the full grid.
std::string describe_halving(const SweepPlan& plan, const SweepSummary& s);

}  // namespace prism
