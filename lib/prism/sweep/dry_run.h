#pragma once
// What `prism sweep --dry-run` prints: every trial (index, name, schedule, seed,
// training FLOPs and, when the sweep file states a throughput, device-hours), the
// totals, the halving rungs, and how the trials would run. Nothing is run.
#include <string>

#include "prism/sweep/plan.h"

namespace prism {

// `dir` is where the sweep would run; `jobs` trials at a time share `threads` (0: every core).
std::string format_dry_run(const SweepPlan& plan, const std::string& dir, int jobs, int threads);

}  // namespace prism
