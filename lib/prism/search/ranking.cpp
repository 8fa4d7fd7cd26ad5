#include "prism/search/ranking.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "prism/error.h"
#include "prism/stats/stats.h"

namespace prism {

namespace {

using Clock = std::chrono::steady_clock;

// Evaluates schedules with a progress line every ~10 s (rate and ETA).
class Evaluations {
 public:
  Evaluations(const ScheduleLoss& loss, const std::function<void(const std::string&)>& log) : loss_(loss), log_(log) {}

  HeldOut run(const HeadSchedule& s, int64_t batches, const std::string& phase, size_t i, size_t n) {
    if (phase != phase_) {
      phase_ = phase;
      phase_start_ = Clock::now();
      last_ = phase_start_;
    }
    HeldOut h = loss_(s, batches);
    const auto now = Clock::now();
    if (log_ && (now - last_ > std::chrono::seconds(10) || i + 1 == n)) {
      last_ = now;
      const double spent = std::chrono::duration<double>(now - phase_start_).count();
      const double rate = static_cast<double>(i + 1) / std::max(spent, 1e-9);
      log_(fmt::format("ranking | {} {}/{} | {:.2f} schedules/s | ETA {:.0f}s", phase, i + 1, n, rate,
                       static_cast<double>(n - i - 1) / std::max(rate, 1e-9)));
    }
    return h;
  }

 private:
  const ScheduleLoss& loss_;
  const std::function<void(const std::string&)>& log_;
  std::string phase_;
  Clock::time_point phase_start_, last_;
};

bool obeys_hard_rules(const HeadSchedule& s, int d_model, int h_base) {
  ScheduleRules r;
  return check_schedule(s, s.n_layer(), d_model, h_base, r).ok();
}

std::vector<RuleFinding> guideline_findings(const HeadSchedule& s, int d_model, int h_base, const ScheduleRules& rules) {
  ScheduleRules r = rules;
  r.strict = false;
  r.hard = true;
  std::vector<RuleFinding> out;
  for (const auto& f : check_schedule(s, s.n_layer(), d_model, h_base, r).findings)
    if (!is_hard_rule(f.rule)) out.push_back(f);
  return out;
}

}  // namespace

int64_t default_probes(const ScheduleSpace& space) {
  const auto params = 1 + static_cast<int64_t>(space.layers()) * (static_cast<int64_t>(space.choices().size()) - 1);
  return 4 * params;
}

LayerScores probe_layer_scores(const ScheduleSpace& space, int64_t probes, int64_t batches, uint64_t seed,
                               const ScheduleLoss& loss) {
  std::vector<std::pair<HeadSchedule, double>> obs;
  SplitMix rng(seed, 0x70726f6265ULL /* "probe" */, 0);
  for (int64_t i = 0; i < probes; ++i) {
    HeadSchedule s = space.sample(rng);
    obs.emplace_back(s, loss(s, batches).loss);
  }
  return fit_layer_scores(obs, space.layers(), space.choices());
}

Ranking rank_space(const ScheduleSpace& space, const RankSettings& st, const ScheduleLoss& loss,
                   const std::optional<LayerScores>& prior, int d_model, const ScheduleRules& rules,
                   const std::function<void(const std::string&)>& log) {
  Ranking out;
  out.space_size = space.size();
  out.batches = st.batches;
  Evaluations eval(loss, log);
  const int h_base = space.h_base();
  // Which schedules to evaluate exactly, and why each.
  std::vector<std::pair<HeadSchedule, std::string>> exact;
  auto want = [&](const HeadSchedule& s, const std::string& why) {
    for (const auto& e : exact)
      if (e.first == s) return;
    exact.emplace_back(s, why);
  };
  for (const auto& s : st.schedules) want(s, "listed");
  if (space.size() <= static_cast<double>(st.exact_limit)) {
    for (const auto& s : space.all(static_cast<size_t>(st.exact_limit))) want(s, "space");
    if (prior) out.scores = prior;
  } else {
    if (prior) {
      out.scores = prior;
    } else {
      const int64_t probes = st.probes > 0 ? st.probes : default_probes(space);
      size_t done = 0;
      const ScheduleLoss probe = [&](const HeadSchedule& s, int64_t batches) {
        return eval.run(s, batches, "probes", done++, static_cast<size_t>(probes));
      };
      out.scores = probe_layer_scores(space, probes, st.probe_batches, st.seed, probe);
      out.probes = probes;
      out.probe_batches = st.probe_batches;
    }
    for (const auto& s : best_schedules(*out.scores, space, static_cast<size_t>(st.candidates), true))
      want(s, "top (rules 1-3)");
    for (const auto& s : best_schedules(*out.scores, space, static_cast<size_t>(st.candidates), false))
      want(s, "top (unconstrained)");
  }
  for (size_t i = 0; i < exact.size(); ++i) {
    RankedSchedule r;
    r.schedule = exact[i].first;
    r.why = exact[i].second;
    const HeldOut h = eval.run(r.schedule, st.batches, "exact", i, exact.size());
    r.loss = h.loss;
    r.loss_se = h.se;
    if (out.scores) r.estimate = out.scores->estimate(r.schedule);
    r.hard_rules = obeys_hard_rules(r.schedule, d_model, h_base);
    r.guidelines = guideline_findings(r.schedule, d_model, h_base, rules);
    out.ranked.push_back(std::move(r));
  }
  // Best first; NaN losses (a diverged evaluation) last.
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const RankedSchedule& a, const RankedSchedule& b) {
    if (std::isnan(a.loss) != std::isnan(b.loss)) return std::isnan(b.loss);
    return a.loss < b.loss;
  });
  for (size_t i = 0; i < out.ranked.size(); ++i) {
    const auto& r = out.ranked[i];
    if (std::isnan(r.loss)) continue;
    if (out.unconstrained < 0) out.unconstrained = static_cast<int>(i);
    if (r.hard_rules && out.decoded < 0) out.decoded = static_cast<int>(i);
    if (r.hard_rules && r.guidelines.empty() && out.all_rules < 0) out.all_rules = static_cast<int>(i);
  }
  if (out.scores) {
    std::vector<double> est, ex;
    for (const auto& r : out.ranked)
      if (std::isfinite(r.estimate) && std::isfinite(r.loss)) {
        est.push_back(r.estimate);
        ex.push_back(r.loss);
      }
    out.estimate_tau = kendall_tau(est, ex);
  }
  return out;
}

}  // namespace prism
