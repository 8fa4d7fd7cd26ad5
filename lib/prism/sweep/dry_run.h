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
std::string format_measured_eta(const SweepPlan& plan, int jobs, int threads);

// A warning for the trials that name bf16 on a CPU where bf16 matmuls run slower
// than fp32 (train/cpu_dtype_probe.h): the ratio, the ETA and the fix; "" for none.
std::string sweep_bf16_warning(const SweepPlan& plan, int jobs, int threads);

}  // namespace prism
