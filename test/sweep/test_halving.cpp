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

TEST_CASE("seed noise is the residual of the configurations x seeds table", "[sweep][halving]") {
  // Losses = config effect + seed effect exactly: no residual noise.
  std::vector<GroupScore> exact = {{"a", 0, false, false, {{0, 5.0}, {1, 5.2}, {2, 4.9}}},
                                   {"b", 0, false, false, {{0, 5.1}, {1, 5.3}, {2, 5.0}}}};
  for (auto& g : exact) g.val_loss = (g.by_seed[0] + g.by_seed[1] + g.by_seed[2]) / 3;
  auto [s0, n0] = seed_noise(exact);
  CHECK(n0 == 3);
  CHECK(s0 == Approx(0).margin(1e-12));
  // Two configs, two seeds: residuals are +-e/4 where e is the interaction; sigma^2 = 4 (e/4)^2 / 1.
  std::vector<GroupScore> two = {{"a", 0, false, false, {{0, 1.0}, {1, 2.0}}}, {"b", 0, false, false, {{0, 1.0}, {1, 2.4}}}};
  for (auto& g : two) g.val_loss = (g.by_seed[0] + g.by_seed[1]) / 2;
  CHECK(seed_noise(two).first == Approx(0.2));  // e = 0.4
  // Seeds missing from a configuration are left out; one seed gives no estimate.
  two[1].by_seed.erase(1);
  CHECK(std::isnan(seed_noise(two).first));
  CHECK(seed_noise(two).second == 1);
}

TEST_CASE("configurations within noise of the best are promoted besides the top 1/eta", "[sweep][halving]") {
  HalvingSettings h;
  h.eta = 3;
  // Seed effects shared by all (paired); small interaction noise (about 0.01); a and b are close to the best,
  // c is far behind.
  std::map<uint64_t, double> seed = {{0, 0.00}, {1, 0.30}, {2, -0.20}};
  std::vector<std::pair<std::string, std::vector<double>>> rows = {{"best", {4.000, 4.010, 3.995}},
                                                                   {"a", {4.004, 4.020, 3.990}},
                                                                   {"b", {4.012, 4.000, 4.010}},
                                                                   {"c", {4.300, 4.290, 4.310}},
                                                                   {"d", {4.500, 4.520, 4.480}},
                                                                   {"e", {4.600, 4.610, 4.590}}};
  std::vector<GroupScore> s;
  for (const auto& [name, v] : rows) {
    GroupScore g{name, 0, false, false, {}};
    for (uint64_t k = 0; k < 3; ++k) g.by_seed[k] = v[k] + seed[k];
    g.val_loss = (g.by_seed[0] + g.by_seed[1] + g.by_seed[2]) / 3;
    s.push_back(g);
  }
  auto d = promote(s, 0, 100, h);
  auto find = [&](const std::string& g) {
    for (const auto& x : d)
      if (x.group == g) return x;
    FAIL("missing " << g);
    return d[0];
  };
  // Top ceil(6/3) = 2: best and a; b is within 2 SE of the best; c, d, e are many SE behind.
  CHECK(find("best").reason == "top 2 of 6");
  CHECK(find("a").promoted);
  CHECK(find("b").promoted);
  CHECK_THAT(find("b").reason, Catch::StartsWith("within noise of the best"));
  CHECK(find("b").gap < 2 * find("b").gap_se);
  CHECK_FALSE(find("c").promoted);
  CHECK_THAT(find("c").reason, Catch::StartsWith("pruned: +0.") && Catch::Contains("SE behind"));
  CHECK(find("c").gap / find("c").gap_se > 10);
  // noise_k 0: the plain rule.
  h.noise_k = 0;
  auto plain = promote(s, 0, 100, h);
  int promoted = 0;
  for (const auto& x : plain) promoted += x.promoted;
  CHECK(promoted == 2);
}
