// Successive halving's rules (halving.h): rung budgets, who is promoted, and
// the config of a rung run.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "prism/config/config.h"
#include "prism/error.h"
#include "prism/sweep/halving.h"
#include "sweep/sweep_support.h"

using namespace prism;

TEST_CASE("rung budgets grow by eta up to max_steps", "[sweep][halving]") {
  HalvingSettings h;
  h.eta = 3;
  CHECK(rung_budgets(900, h) == std::vector<int64_t>{100, 300, 900});  // default: max / eta^2
  h.min_steps = 20;
  CHECK(rung_budgets(240, h) == std::vector<int64_t>{20, 60, 180, 240});
  h.eta = 2;
  h.min_steps = 3;
  CHECK(rung_budgets(12, h) == std::vector<int64_t>{3, 6, 12});
  h.min_steps = 12;
  CHECK_THROWS_WITH(rung_budgets(12, h), Catch::Contains("min_steps"));
}

TEST_CASE("the best 1/eta are promoted, the baseline always, failures never", "[sweep][halving]") {
  HalvingSettings h;
  h.eta = 3;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<GroupScore> s = {{"a", 5.0, false, false}, {"b", 4.0, false, false}, {"base", 6.0, true, false},
                               {"c", 4.5, false, false}, {"d", inf, false, true},  {"e", 5.5, false, false},
                               {"f", 4.0, false, false}};
  auto d = promote(s, 1, 60, h);
  REQUIRE(d.size() == 7);
  // 6 configurations besides the baseline: keep ceil(6/3) = 2 -> b and f (tie, by
  // name); c, third, is pruned; the baseline goes up besides them.
  CHECK(d[0].group == "b");
  CHECK(d[1].group == "f");
  CHECK(d[2].group == "c");
  CHECK(d[0].promoted);
  CHECK(d[1].promoted);
  CHECK_FALSE(d[2].promoted);
  CHECK(d[0].reason == "top 2 of 6");
  CHECK(d[0].rung == 1);
  CHECK(d[0].steps == 60);
  CHECK(d[0].rank == 1);
  auto find = [&](const std::string& g) {
    for (const auto& x : d)
      if (x.group == g) return x;
    FAIL("missing " << g);
    return d[0];
  };
  CHECK(find("base").promoted);
  CHECK(find("base").reason == "baseline");
  CHECK_FALSE(find("a").promoted);
  CHECK(find("a").reason == "pruned");
  CHECK_FALSE(find("d").promoted);
  CHECK(find("d").reason == "failed");
  CHECK(find("d").rank == 7);  // failures rank last
  h.keep_baseline = false;
  CHECK_FALSE(promote(s, 0, 20, h)[5].promoted);
  // A single configuration is always promoted.
  CHECK(promote({{"only", 9.0, false, false}}, 0, 1, h)[0].promoted);
}

TEST_CASE("a baseline that ranks first never takes a schedule's place", "[sweep][halving]") {
  HalvingSettings h;
  h.eta = 3;
  std::vector<GroupScore> s = {{"base", 7.0, true, false}, {"a", 7.2, false, false}, {"b", 7.1, false, false}};
  auto d = promote(s, 0, 18, h);
  REQUIRE(d.size() == 3);
  CHECK(d[0].group == "base");
  CHECK(d[0].promoted);
  CHECK(d[0].reason == "baseline");
  CHECK(d[1].group == "b");
  CHECK(d[1].promoted);
  CHECK(d[1].reason == "top 1 of 2");
  CHECK_FALSE(d[2].promoted);
  // Without keep_baseline the baseline competes like any configuration.
  h.keep_baseline = false;
  auto e = promote(s, 0, 18, h);
  CHECK(e[0].promoted);
  CHECK_FALSE(e[1].promoted);
  CHECK_FALSE(e[2].promoted);
}

TEST_CASE("a rung run is the trial's config with the budget as max_steps, warmup scaled", "[sweep][halving]") {
  Trial t;
  t.name = "x";
  YAML::Node root = YAML::Load(prism::test::tiny_base("/d", 12));
  root["train"]["warmup_steps"] = 4;
  t.config = to_yaml(parse_config(root, "t"));
  t.max_steps = 12;
  auto c = parse_config(YAML::Load(rung_config(t, 3)), "rung");
  CHECK(c.train.max_steps == 3);
  CHECK(c.train.warmup_steps == 1);
  CHECK(c.train.lr == 3.0e-3);
  auto full = parse_config(YAML::Load(rung_config(t, 12)), "rung");
  CHECK(to_yaml(full) == t.config);
}
