#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "prism/error.h"
#include "prism/stats/sequential.h"
#include "prism/stats/stats.h"

using namespace prism;

TEST_CASE("sequential design: looks, levels below alpha/m, sticky verdicts", "[analysis][stats][sequential]") {
  SequentialDesign d;  // 3, 6, ..., 21 pairs
  CHECK(d.looks() == 7);
  CHECK(d.pairs_at(0) == 3);
  CHECK(d.pairs_at(6) == 21);
  CHECK(d.look_of(12) == 3);
  CHECK(d.look_of(13) == -1);
  SequentialDesign odd{4, 5, 12};
  CHECK(odd.looks() == 3);  // 4, 9, 12
  CHECK(odd.pairs_at(2) == 12);
  CHECK_THROWS_AS((SequentialDesign{1, 3, 21}.check()), Error);
  CHECK_THROWS_AS((SequentialDesign{5, 3, 4}.check()), Error);

  // Seven looks at one level: below the single test's alpha / m, above alpha / (m looks)
  // (the looks correlate, so Bonferroni over them would waste power).
  d.margin = 0.01;
  const SequentialLevels one = sequential_levels(d, 1), two = sequential_levels(d, 2);
  CHECK(one.difference < 0.05);
  CHECK(one.difference > 0.05 / 7);
  CHECK(two.difference < one.difference);
  CHECK(two.difference > 0.025 / 7);
  CHECK(one.equivalence < 0.05);
  CHECK(one.equivalence > 0.05 / 7);
  CHECK(sequential_levels(d, 1).difference == one.difference);  // fixed seed: the same design, the same level

  // A clear difference at look 1 stands later even when the later pairs blur it.
  std::vector<std::vector<double>> diffs{{-0.05, -0.051, -0.049, 0.3, -0.2, 0.1},
                                         {0.001, -0.001, 0.0005, -0.0004, 0.0002, 0.0001}};
  const auto h = sequential_history(d, diffs, 6);
  REQUIRE(h.size() == 2);
  CHECK(h[0][0] == "better");
  CHECK(h[1][0] == "better");
  CHECK(mean_p_value(diffs[0]) > 0.5);  // what a fresh test of all 6 would say
  CHECK(h[1][1] == "equivalent");       // within +-0.01, tight
  CHECK_THROWS_WITH(sequential_history(d, diffs, 5), Catch::Contains("not a look of the design"));
  CHECK_THROWS_WITH(sequential_history(d, diffs, 9), Catch::Contains("this look needs 9"));
}

TEST_CASE("sequential design: over 10,000 simulated studies no false verdict beyond alpha", "[analysis][stats][sequential]") {
  // Two schedules against uniform, sd 0.013 (the CPU study's largest), margin 0.01.
  SequentialDesign d;
  d.margin = 0.01;
  const SequentialSim null = simulate_sequential(d, 2, 0.0, 0.013, 10000, 1);
  INFO("null: better/worse in " << null.any_difference << ", mean pairs " << null.mean_pairs);
  CHECK(null.any_difference <= 0.05);
  CHECK(null.any_difference >= 0.02);  // not so conservative that it wastes the level
  // At the margin exactly, "equivalent" is false.
  const SequentialSim edge = simulate_sequential(d, 2, 0.01, 0.013, 10000, 2);
  INFO("edge: equivalent in " << edge.any_equivalent);
  CHECK(edge.any_equivalent <= 0.05);
  // A real effect of 0.015 is found, and often before the cap.
  const SequentialSim real = simulate_sequential(d, 2, -0.015, 0.013, 2000, 3);
  INFO("effect: right verdicts " << real.correct_each << ", mean pairs " << real.mean_pairs);
  CHECK(real.correct_each > 0.8);
  CHECK(real.mean_pairs < 21);
  CHECK(real.stopped_early > 0.5);
}
