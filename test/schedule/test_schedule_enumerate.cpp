#include <catch2/catch.hpp>

#include "prism/error.h"
#include "prism/schedule/enumerate.h"

using namespace prism;

namespace {
EnumerationSpace space(int L, int d, int h, std::vector<int> dims) {
  EnumerationSpace sp;
  sp.n_layer = L;
  sp.d_model = d;
  sp.h_base = h;
  sp.head_dims = std::move(dims);
  return sp;
}
}  // namespace

TEST_CASE("enumeration at 124M with widths 256,128 gives the hand count", "[schedule][enumerate]") {
  // Baseline >= 6 layers, so wide stages use <= 6 layers in blocks of 2-4:
  //   uniform: 1; {256}: 2,3,4 -> 3; {128}: 3; {256,128}: (a,b) with a+b <= 6 -> 6.  Total 13.
  auto all = enumerate_schedules(space(12, 768, 12, {256, 128}));
  REQUIRE(all.size() == 13);
  CHECK(all[0] == HeadSchedule::uniform(12, 12));
  CHECK(all[1] == HeadSchedule::parse("3x2,12x10"));
  CHECK(all[3] == HeadSchedule::parse("3x4,12x8"));
  CHECK(all[4] == HeadSchedule::parse("6x2,12x10"));
  CHECK(all[7] == HeadSchedule::parse("3x2,6x2,12x8"));
  CHECK(all[12] == HeadSchedule::parse("3x4,6x2,12x6"));
  // The paper's 124M example is among them.
  CHECK(std::find(all.begin(), all.end(), HeadSchedule::parse("3x3,6x3,12x6")) != all.end());
}

TEST_CASE("every enumerated schedule passes all rules, and none repeats", "[schedule][enumerate]") {
  auto sp = space(24, 1024, 16, {});
  sp.rules.strict = true;
  auto all = enumerate_schedules(sp);
  // default widths for 1024/16: 256, 128 (powers of two above 64, up to 256)
  CHECK(default_wide_head_dims(1024, 16) == std::vector<int>{256, 128});
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(check_schedule(all[i], 24, 1024, 16, sp.rules).clean());
    for (size_t j = 0; j < i; ++j) CHECK(all[i] != all[j]);
  }
  // 24 layers, baseline >= 12, wide layers <= 12: {256}: 3, {128}: 3, pairs: all 9 fit. + uniform = 16.
  CHECK(all.size() == 16);
}

TEST_CASE("small case: 4 layers, one wide width, baseline share 1/2", "[schedule][enumerate]") {
  // L=4, d=64, h=4 (width 16); width 32 -> 2 heads. Early <= 2 layers, block 2..4: only [2,2,4,4].
  auto all = enumerate_schedules(space(4, 64, 4, {32}));
  REQUIRE(all.size() == 2);
  CHECK(all[1] == HeadSchedule::parse("2x2,4x2"));
  auto sp = space(4, 64, 4, {32});
  sp.include_uniform = false;
  CHECK(enumerate_schedules(sp).size() == 1);
}

TEST_CASE("enumeration order is deterministic", "[schedule][enumerate]") {
  auto a = enumerate_schedules(space(12, 768, 12, {128, 256}));
  auto b = enumerate_schedules(space(12, 768, 12, {256, 128}));
  CHECK(a == b);
}

TEST_CASE("enumeration rejects widths that are not wide or do not divide", "[schedule][enumerate]") {
  CHECK_THROWS_WITH(enumerate_schedules(space(12, 768, 12, {64})), Catch::Contains("64"));
  CHECK_THROWS_WITH(enumerate_schedules(space(12, 768, 12, {512})), Catch::Contains("512"));
}
