#pragma once
// Successive halving, the synchronous form of ASHA's promotion rule: every
// configuration (a schedule and its other grid values, all seeds together)
// first trains for a small step budget; the best 1/eta by mean validation loss
// across its seeds are promoted to a budget eta times larger, and so on up to
// train.max_steps. The uniform baseline is always promoted (keep_baseline), so
// the final table can compare against it, and then in addition to the best 1/eta
// of the other configurations, never in place of one.
//
// Noise. Ranking by the mean alone ranks noise when configurations differ by
// less than seeds do. So every configuration whose mean is within noise_k
// standard errors of the best's is promoted too. The standard error comes from
// the seeds, paired: configurations trained with the same seed share their
// initial weights and data order (head counts do not change parameter shapes),
// so the loss is modelled as config effect + seed effect + noise, and the noise
// variance is the residual of that two-way table over the seeds every
// configuration has ((C-1)(S-1) degrees of freedom); a difference of two
// configuration means then has SE = sigma * sqrt(2 / S). With one seed there is
// no estimate and the rule is the plain top 1/eta.
//
// Each rung is a complete run at its budget (max_steps set to the budget, warmup
// scaled with it), not a truncated long run: a cosine schedule cut short ranks
// configurations by how far their learning rate has decayed, not by how well
// they learn. So the last rung's runs are exactly the full grid's runs.
// Rungs run one after the other (a barrier), which makes every decision a pure
// function of the results: the same with --jobs 1 or 8, and after a resume.
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "prism/sweep/plan.h"

namespace prism {

// The first rung's budget: min_steps, or max_steps / eta^2 (at least 1) when it is 0.
int64_t first_rung_budget(int64_t max_steps, const HalvingSettings& h);
// Step budgets of the rungs, increasing, the last = max_steps.
std::vector<int64_t> rung_budgets(int64_t max_steps, const HalvingSettings& h);

// A configuration's result at one rung.
struct GroupScore {
  std::string group;
  double val_loss = 0;   // mean final validation loss over its seeds (inf if any failed)
  bool baseline = false;
  bool failed = false;
  std::map<uint64_t, double> by_seed;  // final validation loss of each seed's run (for the noise estimate)
};

struct PromotionDecision {
  int rung = 0;
  int64_t steps = 0;     // the rung's budget
  std::string group;
  double val_loss = 0;
  int rank = 0;          // 1 = best
  bool promoted = false;
  std::string reason;    // "top 2 of 5", "within noise of the best", "baseline", "pruned", "failed"
  double gap = 0;        // val_loss - the best's
  double gap_se = std::numeric_limits<double>::quiet_NaN();  // SE of that difference (NaN: one seed)
};

// The residual standard deviation of final losses in a configurations x seeds
// table (see above), over the seeds all non-failed configurations have, and the
// number of those seeds. NaN when fewer than 2 configurations or 2 seeds.
std::pair<double, int> seed_noise(const std::vector<GroupScore>& scores);

// Ranks the configurations of one rung and picks those to promote.
std::vector<PromotionDecision> promote(const std::vector<GroupScore>& scores, int rung, int64_t steps,
                                       const HalvingSettings& h);

// A trial's config text with its budget set to `steps` (warmup scaled alike).
std::string rung_config(const Trial& trial, int64_t steps);

}  // namespace prism
