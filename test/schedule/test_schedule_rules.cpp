#include <catch2/catch.hpp>

#include "prism/error.h"
#include "prism/schedule/rules.h"

using namespace prism;

namespace {
ScheduleReport check(const std::string& s, int d = 768, int base = 12, ScheduleRules r = {}) {
  auto hs = HeadSchedule::parse(s);
  return check_schedule(hs, hs.n_layer(), d, base, r);
}
bool has(const ScheduleReport& rep, Rule rule, int layer, bool error) {
  for (const auto& f : rep.findings)
    if (f.rule == rule && f.layer == layer && f.error == error) return true;
  return false;
}
}  // namespace

TEST_CASE("the paper's example schedules satisfy all six rules", "[schedule][rules]") {
  CHECK(check("3x3,6x3,12x6").clean());
  CHECK(check("4x4,8x4,16x16", 1024, 16).clean());
  CHECK(check("6x4,12x4,24x16", 1536, 24).clean());
  CHECK(check("12x12").clean());  // the uniform baseline
}

TEST_CASE("rule 1: every count divides d_model", "[schedule][rules]") {
  auto rep = check("3x3,5,6x2,12x6");  // layer 3 has 5 heads
  CHECK_FALSE(rep.ok());
  CHECK(has(rep, Rule::Divisibility, 3, true));
  CHECK(check("3x3,6x3,12x6").ok());
}

TEST_CASE("rule 2: counts never decrease", "[schedule][rules]") {
  auto rep = check("6x3,3x3,12x6");
  CHECK_FALSE(rep.ok());
  CHECK(has(rep, Rule::Monotonicity, 3, true));
}

TEST_CASE("rule 3: the last layer has the baseline count", "[schedule][rules]") {
  auto rep = check("3x3,6x3,12x5,24");
  CHECK_FALSE(rep.ok());
  CHECK(has(rep, Rule::BoundaryConvergence, 11, true));
}

TEST_CASE("rule 4: wide stages last 2-4 layers (guideline)", "[schedule][rules]") {
  auto one = check("3,6x3,12x8");  // a single-layer stage
  CHECK(one.ok());                 // a guideline: a warning, not an error
  CHECK(has(one, Rule::StaircaseSmoothness, 0, false));
  auto five = check("3x5,12x7");   // a five-layer stage
  CHECK(has(five, Rule::StaircaseSmoothness, 0, false));
  CHECK(check("3x2,6x4,12x6").clean());
  ScheduleRules strict;
  strict.strict = true;
  CHECK_FALSE(check("3,6x3,12x8", 768, 12, strict).ok());
}

TEST_CASE("rule 5: at least half the layers use the baseline (guideline)", "[schedule][rules]") {
  auto rep = check("3x4,6x3,12x5");  // 5 of 12
  CHECK(rep.ok());
  CHECK(has(rep, Rule::BaselinePreservation, -1, false));
  CHECK(check("3x3,6x3,12x6").clean());  // exactly 6 of 12
}

TEST_CASE("rule 6: wide head widths are powers of two (guideline)", "[schedule][rules]") {
  auto rep = check("8x2,12x10");  // 768 / 8 = 96
  CHECK(rep.ok());
  CHECK(has(rep, Rule::HardwareAlignment, 0, false));
  CHECK(has(rep, Rule::HardwareAlignment, 1, false));
  // A non-power-of-two baseline width is the baseline's business, not rule 6's.
  CHECK(check("12x12", 1152, 12).clean());  // baseline width 96
  auto wide = check("9x2,12x10", 1152, 12);  // 1152 / 9 = 128: aligned, though the baseline's 96 is not
  CHECK(wide.clean());
}

TEST_CASE("require_valid_schedule names the rule, the layer and a fix", "[schedule][rules]") {
  try {
    require_valid_schedule(HeadSchedule::parse("6x3,3x3,12x6"), 12, 768, 12);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("rule 2") && Catch::Contains("layer 3") && Catch::Contains("Fix:"));
  }
  try {
    require_valid_schedule(HeadSchedule::parse("12x11"), 12, 768, 12);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("11 layers") && Catch::Contains("12"));
  }
  CHECK_NOTHROW(require_valid_schedule(HeadSchedule::parse("3,6x3,12x8"), 12, 768, 12));
  ScheduleRules strict;
  strict.strict = true;
  CHECK_THROWS_WITH(require_valid_schedule(HeadSchedule::parse("3,6x3,12x8"), 12, 768, 12, strict),
                    Catch::Contains("rule 4"));
}
