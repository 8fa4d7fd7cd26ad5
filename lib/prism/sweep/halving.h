#pragma once
// Successive halving, the synchronous form of ASHA's promotion rule: every
// configuration (a schedule and its other grid values, all seeds together)
// first trains for a small step budget; the best 1/eta by mean validation loss
// across its seeds are promoted to a budget eta times larger, and so on up to
// train.max_steps. The uniform baseline is always promoted (keep_baseline), so
// the final table can compare against it, and then in addition to the best 1/eta
// of the other configurations, never in place of one.
//
// Each rung is a complete run at its budget (max_steps set to the budget, warmup
// scaled with it), not a truncated long run: a cosine schedule cut short ranks
// configurations by how far their learning rate has decayed, not by how well
// they learn. So the last rung's runs are exactly the full grid's runs.
// Rungs run one after the other (a barrier), which makes every decision a pure
// function of the results: the same with --jobs 1 or 8, and after a resume.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/sweep/plan.h"

namespace prism {

// Step budgets of the rungs, increasing, the last = max_steps.
std::vector<int64_t> rung_budgets(int64_t max_steps, const HalvingSettings& h);

// A configuration's result at one rung.
struct GroupScore {
  std::string group;
  double val_loss = 0;   // mean final validation loss over its seeds (inf if any failed)
  bool baseline = false;
  bool failed = false;
};

struct PromotionDecision {
  int rung = 0;
  int64_t steps = 0;     // the rung's budget
  std::string group;
  double val_loss = 0;
  int rank = 0;          // 1 = best
  bool promoted = false;
  std::string reason;    // "top 2 of 5", "baseline", "pruned", "failed"
};

// Ranks the configurations of one rung and picks those to promote.
std::vector<PromotionDecision> promote(const std::vector<GroupScore>& scores, int rung, int64_t steps,
                                       const HalvingSettings& h);

// A trial's config text with its budget set to `steps` (warmup scaled alike).
std::string rung_config(const Trial& trial, int64_t steps);

}  // namespace prism
