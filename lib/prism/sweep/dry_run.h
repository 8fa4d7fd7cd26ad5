#pragma once
// What `prism sweep --dry-run` prints: every trial (index, name, schedule, seed,
// training FLOPs and, when the sweep file states a throughput, device-hours), the
// totals, the halving rungs, and how the trials would run. Nothing is run.
#include <string>

#include "prism/sweep/plan.h"

namespace prism {

// `dir` is where the sweep would run; `jobs` trials at a time share `threads` (0: every core).
std::string format_dry_run(const SweepPlan& plan, const std::string& dir, int jobs, int threads);

// The sweep's ETA on this machine from measured steps: one training step of each
// distinct setup (model, batch, dtype, device, back end; at most 4) is timed here on
// random tokens (train/step_probe.h) at the threads a trial gets, and every trial's
// steps are costed at its setup's step time scaled by its FLOPs per token. Trials on
// a device this machine lacks, or whose step would take over a minute here, are
// named instead. With successive halving the grid's ETA is an upper bound.
std::string format_measured_eta(const SweepPlan& plan, int jobs, int threads, double* eta_s = nullptr);

// The sd of Prism - uniform final validation loss, paired by seed, in a finished (pilot)
// sweep: every non-uniform configuration against the uniform one of the same other grid
// values, over the seeds both completed at the full budget, pooled (df-weighted variances).
struct PairedSd {
  double sd = 0;               // NaN: none
  int comparisons = 0, pairs = 0;
  double lo = 0, hi = 0;       // the smallest and largest sd of one comparison
};
// Throws prism::Error for a directory that is not a sweep, or one with no paired seeds.
PairedSd pilot_paired_sd(const std::string& sweep_dir);

// The dry run's power plan: for the grid's seeds, the minimum detectable effect of each
// comparison against uniform (80% power, two-sided paired t at 0.05, and at Holm's first step
// over the grid's comparisons), and the seeds needed for the target effect (sweep.power.effect,
// else the paper's at the model's scale) with their cost. The sd comes from `pilot_dir` ("":
// none), else sweep.power.sd with its source; without either the plan says it has none.
// `eta_s` is the grid's ETA here (0: none), costed per seed.
std::string format_power_plan(const SweepPlan& plan, const std::string& pilot_dir, double eta_s = 0);

// The power plan's lines for sweep.sequential: the design's looks and its one per-look level
// (stats/sequential.h), then its operating characteristics over `sims` simulated studies
// of `comparisons` comparisons at `sd`: the false better/worse rate with no effect, the false
// "equivalent" rate at a true difference of exactly +-effect (the margin), and at an effect of
// `effect` the share of right verdicts and the pairs used, against the pairs a fixed design of
// that power needs.
std::string format_sequential_plan(const SequentialSettings& q, int comparisons, double sd, double effect,
                                   int sims = 10000);

// A warning for the trials that name bf16 on a CPU where bf16 matmuls run slower
// than fp32 (train/cpu_dtype_probe.h): the ratio, the ETA and the fix; "" for none.
std::string sweep_bf16_warning(const SweepPlan& plan, int jobs, int threads);

}  // namespace prism
