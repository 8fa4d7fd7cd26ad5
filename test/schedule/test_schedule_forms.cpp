#include <catch2/catch.hpp>

#include "prism/error.h"
#include "prism/schedule/head_schedule.h"

using prism::HeadSchedule;

TEST_CASE("compact forms resolve to one list of counts", "[schedule]") {
  std::vector<int> paper124 = {3, 3, 3, 6, 6, 6, 12, 12, 12, 12, 12, 12};
  CHECK(HeadSchedule::parse("3,3,3,6,6,6,12,12,12,12,12,12").heads() == paper124);
  CHECK(HeadSchedule::parse("3x3,6x3,12x6").heads() == paper124);
  CHECK(HeadSchedule::parse("[3x3, 6, 6, 6, 12x6]").heads() == paper124);
  // The forms prism's CSVs write: summary.csv's "[1, 1, 4]", ranking.csv's space-separated "32 8".
  CHECK(HeadSchedule::parse("[1, 1, 4]").heads() == std::vector<int>{1, 1, 4});
  CHECK(HeadSchedule::parse("32 8").heads() == std::vector<int>{32, 8});
  CHECK(HeadSchedule::parse(" 3 x 3 ,6x3  12 x 6 ").heads() == paper124);
  CHECK(HeadSchedule::from_staircase({{256, 3}, {128, 3}, {64, 6}}, 768).heads() == paper124);
  CHECK(HeadSchedule::uniform(4, 12).heads() == std::vector<int>{12, 12, 12, 12});
}

TEST_CASE("compact() round-trips and names runs", "[schedule]") {
  auto s = HeadSchedule::parse("4x4,8x4,16x16");
  CHECK(s.compact() == "4x4,8x4,16x16");
  CHECK(HeadSchedule::parse(s.compact()) == s);
  CHECK(HeadSchedule::parse("1,2,2").compact() == "1,2x2");
  CHECK(s.runs() == std::vector<std::pair<int, int>>{{4, 4}, {8, 4}, {16, 16}});
  CHECK(s.n_layer() == 24);
  CHECK_FALSE(s.is_uniform());
  CHECK(HeadSchedule::uniform(3, 5).is_uniform());
}

TEST_CASE("malformed compact forms are errors that show the fix", "[schedule]") {
  for (const char* bad : {"", "3,,6", "3 , ,6", "3x", "x3", "3x0", "a,b", "3y2", "-3", "[ ]"}) {
    INFO(bad);
    CHECK_THROWS_AS(HeadSchedule::parse(bad), prism::Error);
  }
  try {
    HeadSchedule::parse("3,abc");
    FAIL("no error");
  } catch (const prism::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("abc") && Catch::Contains("NxK"));
  }
}

TEST_CASE("a staircase step whose width does not divide d_model is named", "[schedule]") {
  try {
    HeadSchedule::from_staircase({{256, 3}, {100, 3}, {64, 6}}, 768);
    FAIL("no error");
  } catch (const prism::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("step 2") && Catch::Contains("100"));
  }
}
