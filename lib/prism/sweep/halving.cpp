#include "prism/sweep/halving.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "prism/config/config.h"
#include "prism/error.h"

namespace prism {

std::vector<int64_t> rung_budgets(int64_t max_steps, const HalvingSettings& h) {
  const int64_t first = h.min_steps > 0 ? h.min_steps : std::max<int64_t>(1, max_steps / (h.eta * h.eta));
  if (first >= max_steps)
    throw Error(fmt::format("halving.min_steps = {} leaves no room below train.max_steps = {}", first, max_steps),
                "sweep.halving.min_steps", fmt::format("use a first budget below {}", max_steps));
  std::vector<int64_t> out;
  for (int64_t b = first; b < max_steps; b *= h.eta) out.push_back(b);
  out.push_back(max_steps);
  return out;
}

std::vector<PromotionDecision> promote(const std::vector<GroupScore>& scores, int rung, int64_t steps,
                                       const HalvingSettings& h) {
  std::vector<GroupScore> sorted = scores;
  std::stable_sort(sorted.begin(), sorted.end(), [](const GroupScore& a, const GroupScore& b) {
    const bool fa = a.failed || !std::isfinite(a.val_loss), fb = b.failed || !std::isfinite(b.val_loss);
    if (fa != fb) return fb;
    if (!fa && a.val_loss != b.val_loss) return a.val_loss < b.val_loss;
    return a.group < b.group;
  });
  const int n = static_cast<int>(sorted.size());
  // With keep_baseline the baseline is promoted besides the best 1/eta of the other
  // configurations, never instead of one: a rung must carry a schedule to compare.
  const int candidates = static_cast<int>(
      std::count_if(sorted.begin(), sorted.end(), [&](const GroupScore& g) { return !(h.keep_baseline && g.baseline); }));
  const int keep = std::max(1, (candidates + h.eta - 1) / h.eta);
  int kept = 0;
  std::vector<PromotionDecision> out;
  for (int i = 0; i < n; ++i) {
    const GroupScore& g = sorted[static_cast<size_t>(i)];
    PromotionDecision d;
    d.rung = rung;
    d.steps = steps;
    d.group = g.group;
    d.val_loss = g.val_loss;
    d.rank = i + 1;
    const bool failed = g.failed || !std::isfinite(g.val_loss);
    if (failed) {
      d.reason = "failed";
    } else if (g.baseline && h.keep_baseline) {
      d.promoted = true;
      d.reason = "baseline";
    } else if (kept < keep) {
      ++kept;
      d.promoted = true;
      d.reason = fmt::format("top {} of {}", keep, candidates);
    } else {
      d.reason = "pruned";
    }
    out.push_back(d);
  }
  return out;
}

std::string rung_config(const Trial& trial, int64_t steps) {
  YAML::Node root = YAML::Load(trial.config);
  const int64_t warmup = root["train"]["warmup_steps"].as<int64_t>();
  root["train"]["max_steps"] = steps;
  root["train"]["warmup_steps"] =
      static_cast<int64_t>(std::llround(static_cast<double>(warmup) * static_cast<double>(steps) /
                                        static_cast<double>(std::max<int64_t>(1, trial.max_steps))));
  return to_yaml(parse_config(root, "trial " + trial.name)) + "\n";
}

}  // namespace prism
