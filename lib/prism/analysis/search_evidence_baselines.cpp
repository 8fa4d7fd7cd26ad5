// Baselines trained from scratch at a search's compute (search_evidence_detail.h, Baseline): what a
// researcher without the search would do with the same budget, judged on the ground truth's runs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "prism/analysis/search_evidence_detail.h"

namespace prism::evidence {

namespace {

constexpr double kExactLimit = 2e6;   // draws enumerated one by one up to this many
constexpr int64_t kSampled = 200000;  // else this many, from a fixed seed
constexpr int kMaxSeedsPerSchedule = 5;

double choose(size_t n, size_t k) {
  double c = 1;
  for (size_t i = 0; i < k; ++i) c = c * static_cast<double>(n - i) / static_cast<double>(i + 1);
  return c;
}

// Every k-subset of {0..n-1}, in lexicographic order.
std::vector<std::vector<size_t>> subsets(size_t n, size_t k) {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> idx(k);
  for (size_t i = 0; i < k; ++i) idx[i] = i;
  for (;;) {
    out.push_back(idx);
    size_t i = k;
    while (i > 0 && idx[i - 1] == n - k + i - 1) --i;
    if (i == 0) break;
    ++idx[i - 1];
    for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
  }
  return out;
}

// A uniform k-subset of {0..n-1}, sorted.
std::vector<size_t> draw_subset(size_t n, size_t k, std::mt19937_64& rng) {
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  for (size_t i = 0; i < k; ++i) std::swap(all[i], all[i + std::uniform_int_distribution<size_t>(0, n - i - 1)(rng)]);
  all.resize(k);
  std::sort(all.begin(), all.end());
  return all;
}

// One draw's outcome.
struct Outcome {
  bool best = false, in_band = false;
  double regret = kNaN, tau = kNaN;
};

// The ground truth's losses as a schedule x seed matrix, schedules best first.
struct Matrix {
  std::vector<std::vector<double>> loss;  // [schedule][seed index]
  size_t seeds = 0;
};

Outcome judge_draw(const GroundTruth& g, const Matrix& m, const std::vector<size_t>& schedules,
                   const std::vector<size_t>& seeds) {
  std::vector<bool> used(m.seeds, false);
  for (size_t s : seeds) used[s] = true;
  std::vector<double> trained, held_out;
  size_t pick = schedules.front();
  double pick_loss = std::numeric_limits<double>::infinity();
  for (size_t h : schedules) {
    double in = 0, out = 0;
    for (size_t s = 0; s < m.seeds; ++s) (used[s] ? in : out) += m.loss[h][s];
    in /= static_cast<double>(seeds.size());
    out /= static_cast<double>(m.seeds - seeds.size());
    trained.push_back(in);
    held_out.push_back(out);
    if (in < pick_loss) {
      pick_loss = in;
      pick = h;
    }
  }
  Outcome o;
  const Heads& p = g.schedules[pick];
  o.best = pick == 0;
  o.in_band = g.band.count(p) > 0;
  o.regret = g.mean.at(p) - g.mean.at(g.best());
  o.tau = kendall_tau(trained, held_out);
  return o;
}

// The central 95% of values: the 2.5% and 97.5% order statistics (nearest rank).
Interval central95(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(std::floor(q * static_cast<double>(v.size() - 1) + 0.5))]; };
  return {at(0.025), at(0.975)};
}

Baseline summarize(std::vector<Outcome> outcomes, Baseline b) {
  std::vector<double> regret, tau;
  double best = 0, band = 0;
  for (const auto& o : outcomes) {
    best += o.best;
    band += o.in_band;
    regret.push_back(o.regret);
    tau.push_back(o.tau);
  }
  const double n = static_cast<double>(outcomes.size());
  b.draws = static_cast<int64_t>(outcomes.size());
  b.p_best = best / n;
  b.in_band = band / n;
  b.regret = mean_of(regret);
  const Interval ri = central95(regret), ti = central95(tau);
  b.regret_lo = ri.lo;
  b.regret_hi = ri.hi;
  b.tau = mean_of(tau);
  b.tau_lo = ti.lo;
  b.tau_hi = ti.hi;
  return b;
}

// k seeds for each of `count` schedules: every draw, or a sample of them.
Baseline one_baseline(const GroundTruth& g, const Matrix& m, size_t k, size_t count, Baseline b) {
  const size_t n = g.schedules.size();
  std::vector<Outcome> outcomes;
  const double draws = choose(n, count) * choose(m.seeds, k);
  if (draws <= kExactLimit) {
    const auto seed_sets = subsets(m.seeds, k);
    for (const auto& sched : subsets(n, count))
      for (const auto& seeds : seed_sets) outcomes.push_back(judge_draw(g, m, sched, seeds));
  } else {
    b.sampled = true;
    std::mt19937_64 rng(0);
    for (int64_t i = 0; i < kSampled; ++i) {
      const auto sched = draw_subset(n, count, rng);
      outcomes.push_back(judge_draw(g, m, sched, draw_subset(m.seeds, k, rng)));
    }
  }
  return summarize(std::move(outcomes), b);
}

}  // namespace

std::vector<Baseline> from_scratch_baselines(const GroundTruth& g, double budget_runs, const std::string& methods) {
  Matrix m;
  m.seeds = g.seeds.size();
  for (const auto& h : g.schedules) {
    std::vector<double> row;
    for (uint64_t s : g.seeds) row.push_back(g.loss.at(h).at(s));
    m.loss.push_back(row);
  }
  const size_t n = g.schedules.size();
  const auto budget = static_cast<size_t>(std::floor(budget_runs));
  std::vector<Baseline> out;
  for (size_t k = 1; k < m.seeds && k <= static_cast<size_t>(kMaxSeedsPerSchedule); ++k) {
    const size_t count = std::min(n, budget / k);
    if (count < 2) break;
    Baseline b;
    b.seeds_per_schedule = static_cast<int64_t>(k);
    b.schedules = static_cast<int64_t>(count);
    b.budget_runs = static_cast<double>(count * k);
    b.whole_runs = true;
    b.share = b.budget_runs / static_cast<double>(n * m.seeds);
    b.name = count == n ? fmt::format("grid of all {} schedules x {} seed{} ({} runs) at the budget of {} runs ({})", n, k,
                                      k == 1 ? "" : "s", count * k, budget, methods)
                        : fmt::format("random {} of the {} schedules x {} seeds ({} runs) at the budget of {} runs ({})",
                                      count, n, k, count * k, budget, methods);
    out.push_back(one_baseline(g, m, k, count, b));
  }
  return out;
}

}  // namespace prism::evidence
