#include "prism/sweep/halving.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "prism/config/config.h"
#include "prism/error.h"

namespace prism {

int64_t first_rung_budget(int64_t max_steps, const HalvingSettings& h) {
  return h.min_steps > 0 ? h.min_steps : std::max<int64_t>(1, max_steps / (h.eta * h.eta));
}

std::vector<int64_t> rung_budgets(int64_t max_steps, const HalvingSettings& h) {
  const int64_t first = first_rung_budget(max_steps, h);
  if (first >= max_steps)
    throw Error(fmt::format("halving.min_steps = {} leaves no room below train.max_steps = {}", first, max_steps),
                "sweep.halving.min_steps", fmt::format("use a first budget below {}", max_steps));
  std::vector<int64_t> out;
  for (int64_t b = first; b < max_steps; b *= h.eta) out.push_back(b);
  out.push_back(max_steps);
  return out;
}

std::pair<double, int> seed_noise(const std::vector<GroupScore>& scores) {
  std::vector<const GroupScore*> ok;
  for (const auto& g : scores)
    if (!g.failed && std::isfinite(g.val_loss) && !g.by_seed.empty()) ok.push_back(&g);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (ok.size() < 2) return {nan, 0};
  std::vector<uint64_t> seeds;  // the seeds every configuration has
  for (const auto& entry : ok.front()->by_seed) {
    const uint64_t seed = entry.first;  // a plain variable: C++17 lambdas cannot capture structured bindings
    bool everywhere = std::all_of(ok.begin(), ok.end(), [&](const GroupScore* g) { return g->by_seed.count(seed) > 0; });
    if (everywhere) seeds.push_back(seed);
  }
  const size_t C = ok.size(), S = seeds.size();
  if (S < 2) return {nan, static_cast<int>(S)};
  std::vector<double> row(C, 0), col(S, 0);
  double all = 0;
  for (size_t c = 0; c < C; ++c)
    for (size_t s = 0; s < S; ++s) {
      const double y = ok[c]->by_seed.at(seeds[s]);
      row[c] += y / static_cast<double>(S);
      col[s] += y / static_cast<double>(C);
      all += y / static_cast<double>(C * S);
    }
  double ss = 0;
  for (size_t c = 0; c < C; ++c)
    for (size_t s = 0; s < S; ++s) {
      const double r = ok[c]->by_seed.at(seeds[s]) - row[c] - col[s] + all;
      ss += r * r;
    }
  return {std::sqrt(ss / static_cast<double>((C - 1) * (S - 1))), static_cast<int>(S)};
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
  const auto [sigma, seeds] = seed_noise(scores);
  const double gap_se = seeds >= 2 ? sigma * std::sqrt(2.0 / seeds) : std::numeric_limits<double>::quiet_NaN();
  const double best = sorted.empty() ? 0 : sorted.front().val_loss;
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
    d.gap = failed ? std::numeric_limits<double>::infinity() : g.val_loss - best;
    d.gap_se = gap_se;
    // Within noise: the gap is no larger than noise_k standard errors of a paired difference.
    const bool within_noise = !failed && h.noise_k > 0 && std::isfinite(gap_se) && d.gap <= h.noise_k * gap_se;
    if (failed) {
      d.reason = "failed";
    } else if (g.baseline && h.keep_baseline) {
      d.promoted = true;
      d.reason = "baseline";
    } else if (kept < keep) {
      ++kept;
      d.promoted = true;
      d.reason = fmt::format("top {} of {}", keep, candidates);
    } else if (within_noise) {
      d.promoted = true;
      d.reason = fmt::format("within noise of the best: +{:.4f}, {:.1f} SE", d.gap, d.gap / gap_se);
    } else {
      d.reason = h.noise_k > 0 && std::isfinite(gap_se)
                     ? fmt::format("pruned: +{:.4f}, {:.1f} SE behind", d.gap, d.gap / gap_se)
                     : "pruned";
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
