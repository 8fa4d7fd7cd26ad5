// Per-layer additive scores and the exact decoding of the best schedules by
// dynamic programming (search/layer_scores.h), against brute force.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "prism/error.h"
#include "prism/schedule/rules.h"
#include "prism/search/layer_scores.h"
#include "prism/stats/stats.h"

using namespace prism;

namespace {

LayerScores random_scores(int layers, const std::vector<int>& choices, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  LayerScores s;
  s.layers = layers;
  s.choices = choices;
  for (int i = 0; i < layers * static_cast<int>(choices.size()); ++i) s.score.push_back(normal(gen));
  s.intercept = 3.0;
  return s;
}

// The k best of every schedule in `space` by estimate (rules 2-3 checked when asked), by brute force.
std::vector<HeadSchedule> brute_best(const LayerScores& scores, const ScheduleSpace& space, size_t k, bool rules) {
  auto all = ScheduleSpace::product(space.layers(), space.choices(), space.h_base(), false).all(1 << 20);
  std::vector<HeadSchedule> ok;
  for (const auto& s : all)
    if (!rules || check_schedule(s, s.n_layer(), 128, space.h_base()).ok()) ok.push_back(s);
  std::stable_sort(ok.begin(), ok.end(), [&](const HeadSchedule& a, const HeadSchedule& b) {
    return scores.estimate(a) < scores.estimate(b);
  });
  ok.resize(std::min(k, ok.size()));
  return ok;
}

}  // namespace

TEST_CASE("dynamic programming gives exactly the k best schedules, under rules 1-3 and unconstrained",
          "[search][decode]") {
  const std::vector<int> choices{1, 2, 4, 8, 16};
  const auto space = ScheduleSpace::product(5, choices, 4, false);
  for (unsigned seed = 0; seed < 5; ++seed) {
    INFO("seed " << seed);
    const LayerScores scores = random_scores(5, choices, seed);
    for (bool rules : {true, false}) {
      INFO("rules " << rules);
      const auto dp = best_schedules(scores, space, 12, rules);
      const auto bf = brute_best(scores, space, 12, rules);
      REQUIRE(dp.size() == bf.size());
      for (size_t i = 0; i < dp.size(); ++i) {
        INFO("rank " << i << ": " << dp[i] << " vs " << bf[i]);
        CHECK(scores.estimate(dp[i]) == Approx(scores.estimate(bf[i])).epsilon(1e-12));
        if (rules) CHECK(check_schedule(dp[i], 5, 128, 4).ok());
      }
    }
    // Unconstrained, the best is each layer's own best count.
    CHECK(best_schedules(scores, space, 1, false)[0] == scores.argmin());
  }
}

TEST_CASE("a list space ranks its own schedules by estimate, rules 2-3 leave out those that break them",
          "[search][decode]") {
  LayerScores s;
  s.layers = 3;
  s.choices = {1, 4};
  s.score = {-1, 0, 0, 0, 0, 0};  // layer 0 prefers 1 head
  const auto space = ScheduleSpace::list(
      {HeadSchedule::parse("4,4,4"), HeadSchedule::parse("1,4,4"), HeadSchedule::parse("1,1,1")}, 4);
  const auto unconstrained = best_schedules(s, space, 3, false);
  REQUIRE(unconstrained.size() == 3);
  CHECK(unconstrained[0] == HeadSchedule::parse("1,4,4"));
  CHECK(unconstrained[2] == HeadSchedule::parse("4,4,4"));
  const auto rules = best_schedules(s, space, 3, true);
  REQUIRE(rules.size() == 2);  // 1,1,1 ends wide
  CHECK(rules[0] == HeadSchedule::parse("1,4,4"));
}

TEST_CASE("per-layer scores fitted by least squares recover an additive loss exactly", "[search][decode]") {
  const std::vector<int> choices{1, 2, 4, 8};
  const LayerScores truth = random_scores(4, choices, 11);
  const auto space = ScheduleSpace::product(4, choices, 4, false);
  std::vector<std::pair<HeadSchedule, double>> obs;
  for (int i = 0; i < 40; ++i) {
    SplitMix rng(3, static_cast<uint64_t>(i), 0);
    HeadSchedule sch = space.sample(rng);
    obs.emplace_back(sch, truth.estimate(sch));
  }
  const LayerScores fit = fit_layer_scores(obs, 4, choices);
  for (const auto& sch : space.all(1000)) CHECK(fit.estimate(sch) == Approx(truth.estimate(sch)).margin(1e-9));
  // Each layer's scores are centred.
  for (int l = 0; l < 4; ++l) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) sum += fit.at(l, k);
    CHECK(std::abs(sum) < 1e-9);
  }
  // Too few observations for the parameters: a clear error.
  obs.resize(5);
  CHECK_THROWS_AS(fit_layer_scores(obs, 4, choices), Error);
}

TEST_CASE("Kendall's tau-b matches scipy.stats.kendalltau, ties included", "[search][stats]") {
  // scipy.stats.kendalltau([1, 2, 3, 4, 5], [3, 1, 2, 5, 4]).statistic == 0.4
  CHECK(kendall_tau({1, 2, 3, 4, 5}, {3, 1, 2, 5, 4}) == Approx(0.4));
  // scipy.stats.kendalltau([1, 2, 2, 3], [1, 3, 2, 2]).statistic == 0.4
  CHECK(kendall_tau({1, 2, 2, 3}, {1, 3, 2, 2}) == Approx(0.4));
  CHECK(kendall_tau({1, 2, 3}, {3, 2, 1}) == Approx(-1.0));
  CHECK(std::isnan(kendall_tau({1, 1, 1}, {1, 2, 3})));
}
