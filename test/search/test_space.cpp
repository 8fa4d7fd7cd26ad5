// The spaces a weight-sharing search samples and ranks (search/space.h).
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "prism/error.h"
#include "prism/schedule/rules.h"
#include "prism/search/space.h"

using namespace prism;

namespace {

// Every schedule of `layers` layers over `choices`, by brute force.
std::vector<HeadSchedule> brute_force(int layers, const std::vector<int>& choices) {
  std::vector<HeadSchedule> out;
  std::vector<size_t> idx(static_cast<size_t>(layers), 0);
  for (;;) {
    std::vector<int> h;
    for (size_t i : idx) h.push_back(choices[i]);
    out.emplace_back(h);
    int l = layers - 1;
    while (l >= 0 && ++idx[static_cast<size_t>(l)] == choices.size()) idx[static_cast<size_t>(l--)] = 0;
    if (l < 0) return out;
  }
}

}  // namespace

TEST_CASE("a product space holds K^L schedules, under rules 2-3 exactly those that obey them", "[search][space]") {
  const std::vector<int> choices{8, 1, 4, 2};  // unsorted on purpose
  auto relaxed = ScheduleSpace::product(4, choices, 4, false);
  CHECK(relaxed.choices() == std::vector<int>{1, 2, 4, 8});
  CHECK(relaxed.size() == 256);
  CHECK(relaxed.all(1000).size() == 256);
  auto hard = ScheduleSpace::product(4, choices, 4, true);
  std::set<std::vector<int>> expected;
  for (const auto& s : brute_force(4, {1, 2, 4, 8}))
    if (check_schedule(s, 4, 128, 4).ok()) expected.insert(s.heads());
  std::set<std::vector<int>> got;
  for (const auto& s : hard.all(1000)) got.insert(s.heads());
  CHECK(got == expected);
  CHECK(hard.size() == static_cast<double>(expected.size()));
  CHECK(hard.contains(HeadSchedule::parse("1,2,4,4")));
  CHECK_FALSE(hard.contains(HeadSchedule::parse("2,1,4,4")));   // decreasing
  CHECK_FALSE(hard.contains(HeadSchedule::parse("1,2,4,8")));   // does not end at the baseline
  CHECK(relaxed.contains(HeadSchedule::parse("8,4,2,1")));
  CHECK_FALSE(relaxed.contains(HeadSchedule::parse("3,4,4,4")));
  CHECK_THROWS_AS(ScheduleSpace::product(3, {1, 2}, 4, true), Error);  // the baseline must be a choice
  CHECK_THROWS_AS(relaxed.all(100), Error);
}

TEST_CASE("sampling is uniform over the space and a pure function of (seed, step, slot)", "[search][space]") {
  for (bool hard : {false, true}) {
    INFO("hard rules " << hard);
    auto space = ScheduleSpace::product(3, {1, 2, 4}, 4, hard);
    const auto n = static_cast<int>(space.size());
    std::map<std::vector<int>, int> counts;
    const int draws = 3000 * n;
    for (int i = 0; i < draws; ++i) {
      SplitMix rng(7, static_cast<uint64_t>(i), 3);
      HeadSchedule s = space.sample(rng);
      REQUIRE(space.contains(s));
      counts[s.heads()] += 1;
    }
    REQUIRE(static_cast<int>(counts.size()) == n);
    // Each count is Binomial(draws, 1/n): within 5 standard deviations of 3000.
    for (const auto& [heads, c] : counts) {
      INFO(HeadSchedule(heads).compact() << ": " << c);
      CHECK(std::abs(c - 3000) < 5 * std::sqrt(3000.0));
    }
  }
  auto space = ScheduleSpace::product(6, {1, 2, 4, 8, 16}, 4, false);
  SplitMix a(1, 10, 2), b(1, 10, 2);
  const HeadSchedule sa = space.sample(a);
  CHECK(sa == space.sample(b));
  int differ = 0;
  for (int i = 0; i < 20; ++i) {
    SplitMix x(1, 10, static_cast<uint64_t>(100 + i)), y(2, 10, static_cast<uint64_t>(100 + i));
    differ += space.sample(x) != space.sample(y);
  }
  CHECK(differ >= 18);  // another seed: other draws (two of 15625 schedules coincide rarely)
}

TEST_CASE("a list space keeps its schedules in order, once each, and samples among them", "[search][space]") {
  auto space = ScheduleSpace::list({HeadSchedule::parse("1x2,4x4"), HeadSchedule::parse("4x6"),
                                    HeadSchedule::parse("1x2,4x4"), HeadSchedule::parse("2x3,4x3")},
                                   4);
  REQUIRE(space.listed().size() == 3);
  CHECK(space.listed()[1] == HeadSchedule::uniform(6, 4));
  CHECK(space.choices() == std::vector<int>{1, 2, 4});
  CHECK(space.size() == 3);
  std::set<std::vector<int>> seen;
  for (int i = 0; i < 100; ++i) {
    SplitMix rng(0, static_cast<uint64_t>(i), 0);
    seen.insert(space.sample(rng).heads());
  }
  CHECK(seen.size() == 3);
  CHECK_THROWS_AS(ScheduleSpace::list({HeadSchedule::parse("4x6"), HeadSchedule::parse("4x5")}, 4), Error);
}
