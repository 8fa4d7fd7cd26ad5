// evidence.md: the search evidence's numbers (search_evidence.cpp) as markdown, judged against
// the targets of the options. Nothing is computed here that the tables do not hold.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>

#include "prism/analysis/search_evidence_detail.h"

namespace fs = std::filesystem;

namespace prism::evidence {

std::string num(double v, const char* f) { return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("-"); }

std::string interval(const Interval& i, const char* f) {
  return std::isfinite(i.lo) ? fmt::format("[{}, {}]", fmt::format(fmt::runtime(f), i.lo), fmt::format(fmt::runtime(f), i.hi))
                             : std::string("-");
}

namespace {

// A share in words: "2 of 3" where it is a fraction with a small denominator, else "67%".
std::string share_words(double x) {
  for (int q = 1; q <= 12; ++q) {
    const double p = std::round(x * q);
    if (std::abs(p / q - x) < 1e-6) return fmt::format("{} of {}", static_cast<int>(p), q);
  }
  return fmt::format("{:.0f}%", 100 * x);
}

// The picks a method needs in the band to meet the target: the target's share of its searches, rounded up.
int64_t band_needed(double share, size_t searches) {
  return static_cast<int64_t>(std::ceil(share * static_cast<double>(searches) - 1e-9));
}

std::string ground_truth_section(const GroundTruth& g, const EvidenceOptions& o) {
  const Heads& best = g.best();
  const Heads& worst = g.schedules.back();
  const Paired spread = g.vs_best.at(worst);
  const double half = (spread.ci.hi - spread.ci.lo) / 2;
  std::string md = fmt::format("### Ground truth ({} schedules x {} paired seeds: {})\n\n", g.schedules.size(),
                               g.seeds.size(), o.ground_truth);
  md += fmt::format("Spread from best ({}) to worst ({}): {:.4f} nats; paired {:.0f}% interval of worst - best {}, "
                    "half-width {:.4f}: the spread is {:.1f}x the half-width (needed: {:g}x). Top band (paired interval "
                    "against the best contains 0): {} schedule{}.\n\n",
                    label(best), label(worst), g.mean.at(worst) - g.mean.at(best), 100 * o.confidence,
                    interval(spread.ci), half, (g.mean.at(worst) - g.mean.at(best)) / half, o.targets.spread, g.band.size(),
                    g.band.size() == 1 ? "" : "s");
  md += fmt::format("The ground truth's own agreement: each seed's ranking against the mean of the other {} seeds' has "
                    "Kendall tau {:.3f} on average (per seed: {:.3f}). A single seed ranks the schedules only that well; "
                    "a search's tau against the {}-seed means is read against it.\n\n",
                    g.seeds.size() - 1, mean_of(g.seed_tau), fmt::join(g.seed_tau, ", "), g.seeds.size());
  if (g.best_allowed.empty()) {
    md += "Rules 1-3 allow none of these schedules.\n\n";
  } else if (g.best_allowed != best) {
    const Paired& a = g.vs_best.at(g.best_allowed);
    md += fmt::format("The best breaks a hard rule. Rules 1-3 allow {} of the {} schedules; the best of them, {}, is {} {} "
                      "from the best{}.\n\n",
                      g.allowed.size(), g.schedules.size(), label(g.best_allowed), num(a.diff, "{:+.4f}"),
                      interval(a.ci), g.band.count(g.best_allowed) ? ", in the top band" : ", outside the top band");
  }
  md += "| rank | schedule | val loss | vs best (paired) | 95% CI | top band |\n|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < g.schedules.size(); ++i) {
    const Heads& h = g.schedules[i];
    md += fmt::format("| {} | {} | {:.4f} | {} | {} | {} |\n", i + 1, label(h), g.mean.at(h),
                      num(g.vs_best.at(h).diff, "{:+.4f}"), interval(g.vs_best.at(h).ci), g.band.count(h) ? "yes" : "");
  }
  return md;
}

std::string searches_section(const EvidenceData& d, const EvidenceOptions& o) {
  const GroundTruth& g = d.g;
  std::string md =
      "\n### Searches\n\nEach search is judged by its fine-tuned ranking where it has one (RUN/finetune: its schedules "
      "trained briefly from the shared weights), else by its held-out loss under the shared weights; tau (shared) "
      "is the latter's, tau (estimate) a mixture's architecture weights'.\n\n"
      "| search | method | seed | ranked by | tau | tau (shared) | tau (estimate) | pick | pick vs best (from scratch) | in "
      "band | share of grid (with retraining) |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : d.searches)
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {}{} | {} {} | {} | {:.1f}% ({:.1f}%) |\n",
                      fs::path(r.dir).filename().string(), r.method, r.seed, r.ranking, num(r.tau, "{:.3f}"),
                      num(r.tau_shared, "{:.3f}"), num(r.tau_estimate, "{:.3f}"), label(r.pick),
                      r.pick_in_gt ? "" : " (outside the ground truth)", num(r.pick_vs_best.diff, "{:+.4f}"),
                      interval(r.pick_vs_best.ci), r.pick_trained ? (r.in_band ? "yes" : "no") : "not retrained",
                      100 * r.search_share, 100 * r.total_share);
  if (o.pick == "decoded" && !g.best_allowed.empty() && g.best_allowed != g.best()) {
    md += fmt::format("\nA decoded pick obeys rules 1-3, so it is also judged against the best schedule they allow ({}): "
                      "the band there is the schedules whose paired interval against {} contains 0.\n\n"
                      "| search | pick | vs {} (from scratch) | in that band |\n|---|---|---|---|\n",
                      label(g.best_allowed), label(g.best_allowed), label(g.best_allowed));
    for (const auto& r : d.searches)
      md += fmt::format("| {} | {} | {} {} | {} |\n", fs::path(r.dir).filename().string(), label(r.pick),
                        num(r.pick_vs_allowed.diff, "{:+.4f}"), interval(r.pick_vs_allowed.ci),
                        r.pick_trained ? (r.in_allowed_band ? "yes" : "no") : "not retrained");
  }
  return md;
}

std::string targets_section(const std::vector<MethodSummary>& methods, const EvidenceTargets& t) {
  std::string md = fmt::format(
      "\n### Targets\n\n| method | Kendall tau >= {:g} | pick in the top band in >= {} | search + retraining <= {:g}% "
      "|\n|---|---|---|---|\n",
      t.tau, share_words(t.band), 100 * t.share);
  for (const auto& m : methods)
    md += fmt::format("| {} | tau {} {} over {} searches: {} | {} of {} picks in the top band: {} | {:.1f}% of the grid: {} |\n",
                      m.method, num(m.tau_mean, "{:.3f}"), interval(m.tau_ci, "{:.3f}"), m.searches,
                      m.tau_mean >= t.tau ? "met" : fmt::format("missed by {:.3f}", t.tau - m.tau_mean), m.in_band,
                      m.searches, m.in_band >= band_needed(t.band, m.searches) ? "met" : "missed", 100 * m.share,
                      m.share <= t.share ? "met" : "missed");
  return md;
}

std::string baselines_section(const std::vector<Baseline>& baselines, const std::vector<MethodSummary>& methods) {
  bool sampled = false;
  for (const auto& b : baselines) sampled = sampled || b.sampled;
  std::string md = fmt::format(
      "\n### Baselines at the same compute\n\nA from-scratch baseline spends a method's budget (its search, fine-tune "
      "and the pick retrained on the ground truth's seeds, in runs) on k seeds per schedule: every ground-truth "
      "schedule where the budget reaches them all, else a random subset. It is judged over every equally likely draw "
      "of its schedules and seeds{}: the share of draws whose pick is the best and in the top band, the pick's regret "
      "(its mean minus the best's over the ground truth's seeds) and Kendall tau of the k-seed means against the "
      "means of the other seeds, each with the central 95% of draws.\n\n"
      "| baseline | runs | share of grid | P(pick = best) | pick in top band | mean regret (nats) [central 95%] | tau "
      "[central 95%] | draws |\n|---|---|---|---|---|---|---|---|\n",
      sampled ? " (where they exceed 2 million, 200,000 drawn from a fixed seed, marked *)" : "");
  for (const auto& b : baselines)
    md += fmt::format("| {} | {} | {} | {} | {} | {} {} | {} {} | {}{} |\n", b.name,
                      b.whole_runs ? fmt::format("{}", static_cast<int64_t>(b.budget_runs)) : num(b.budget_runs, "{:.1f}"),
                      num(b.share, "{:.3f}"), num(b.p_best, "{:.2f}"), num(b.in_band, "{:.2f}"), num(b.regret, "{:+.4f}"),
                      interval({b.regret_lo, b.regret_hi}), num(b.tau, "{:.3f}"), interval({b.tau_lo, b.tau_hi}, "{:.3f}"),
                      b.draws, b.sampled ? "*" : "");
  md += "\nThe searches at their budget: picks that are the best, in the top band, the regret of the picks trained "
        "from scratch and tau, each with its 95% t-interval over searches.\n\n"
        "| method | runs | share of grid | picks = best | picks in top band | mean regret (nats) [95% CI] | tau [95% CI] "
        "|\n|---|---|---|---|---|---|---|\n";
  for (const auto& m : methods)
    md += fmt::format("| {} | {:.1f} | {:.3f} | {} of {} | {} of {} | {} {} (of {}) | {} {} |\n", m.method, m.budget_runs,
                      m.share, m.picks_best, m.searches, m.in_band, m.searches, num(m.regret, "{:+.4f}"),
                      interval(m.regret_ci), m.regret_n, num(m.tau_mean, "{:.3f}"), interval(m.tau_ci, "{:.3f}"));
  return md;
}

}  // namespace

std::string render_evidence(const EvidenceData& d, const EvidenceOptions& o) {
  std::string md = ground_truth_section(d.g, o) + searches_section(d, o) + targets_section(d.methods, o.targets) +
                   baselines_section(d.baselines, d.methods);
  for (const auto& n : d.notes) md += "\nnote: " + n + "\n";
  return md;
}

}  // namespace prism::evidence
