// Confidence intervals of the analysis tables against textbook values.
#include <catch2/catch.hpp>

#include <cmath>

#include "prism/error.h"
#include "prism/stats/stats.h"

using namespace prism;

TEST_CASE("stats: Student-t quantiles match the tables", "[analysis][stats]") {
  // Two-sided 95%: t_{0.975, df}.
  CHECK(t_quantile(0.95, 1) == Approx(12.7062047).epsilon(1e-7));
  CHECK(t_quantile(0.95, 4) == Approx(2.7764451).epsilon(1e-7));
  CHECK(t_quantile(0.95, 10) == Approx(2.2281389).epsilon(1e-7));
  CHECK(t_quantile(0.90, 10) == Approx(1.8124611).epsilon(1e-7));
  // Fractional df (Welch): numerical inversion of the t CDF gives 3.2187586.
  CHECK(t_quantile(0.95, 50.0 / 17.0) == Approx(3.2187586).epsilon(1e-6));
  CHECK_THROWS_AS(t_quantile(1.5, 3), Error);
}

TEST_CASE("stats: mean interval and Welch interval by hand", "[analysis][stats]") {
  // mean 3, sd sqrt(2.5), se sqrt(0.5): 3 +- 2.7764451 * 0.70710678.
  Interval i = mean_interval({1, 2, 3, 4, 5}, 0.95);
  CHECK(i.lo == Approx(3 - 1.9632432).epsilon(1e-7));
  CHECK(i.hi == Approx(3 + 1.9632432).epsilon(1e-7));
  CHECK(mean_stderr({0, 1, 1, 0}) == Approx(std::sqrt(1.0 / 3.0) / 2));
  // Fewer than two samples: no interval (NaN), never a zero-width one.
  CHECK(std::isnan(mean_interval({4.0}, 0.95).lo));
  // a = {1,2,3}, b = {4,6,8}: difference -4, se sqrt(1/3 + 4/3), Welch df = 50/17.
  Interval w = welch_interval({1, 2, 3}, {4, 6, 8}, 0.95);
  const double half = 3.2187586 * std::sqrt(5.0 / 3.0);
  CHECK(w.lo == Approx(-4 - half).epsilon(1e-6));
  CHECK(w.hi == Approx(-4 + half).epsilon(1e-6));
  CHECK(std::isnan(welch_interval({1, 2}, {3}, 0.95).lo));
}

TEST_CASE("stats: p-values, Holm's adjustment and McNemar's exact test by hand", "[analysis][stats]") {
  // t = 3 / sqrt(0.5) = 4.2426 with 4 df: two-sided p = 0.013236 (scipy.stats.ttest_1samp([1,2,3,4,5], 0)).
  CHECK(mean_p_value({1, 2, 3, 4, 5}) == Approx(0.0132356).epsilon(1e-5));
  CHECK(std::isnan(mean_p_value({1.0})));
  CHECK(mean_p_value({0, 0, 0}) == 1.0);
  // scipy.stats.ttest_ind([1,2,3], [4,6,8], equal_var=False).pvalue = 0.054787
  CHECK(welch_p_value({1, 2, 3}, {4, 6, 8}) == Approx(0.0547868).epsilon(1e-5));
  // Holm: 0.01, 0.04, 0.03, 0.005 -> sorted 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> 0.06
  // (made non-decreasing); NaN stays NaN and does not count.
  const double nan = std::nan("");
  auto h = holm_adjust({0.01, 0.04, nan, 0.03, 0.005});
  CHECK(h[0] == Approx(0.03));
  CHECK(h[1] == Approx(0.06));
  CHECK(std::isnan(h[2]));
  CHECK(h[3] == Approx(0.06));
  CHECK(h[4] == Approx(0.02));
  CHECK(holm_adjust({0.6, 0.9})[0] == 1.0);  // capped at 1
  // McNemar: 1 against 9 discordant items: 2 * P(X <= 1), X ~ Bin(10, 1/2) = 2 * 11 / 1024.
  CHECK(mcnemar_exact_p(1, 9) == Approx(22.0 / 1024));
  CHECK(mcnemar_exact_p(9, 1) == Approx(22.0 / 1024));
  CHECK(mcnemar_exact_p(5, 5) == 1.0);
  CHECK(mcnemar_exact_p(0, 0) == 1.0);
}

TEST_CASE("stats: power, minimum detectable effects, pairs needed and TOST against statsmodels", "[analysis][stats]") {
  // The standardised effect with power 0.8, from scipy 1.17.1: brentq (xtol 1e-14) on
  // nct.sf(t_crit, n-1, d sqrt n) + nct.cdf(-t_crit, n-1, d sqrt n). statsmodels' TTestPower().solve_power
  // gives the same to its root finder's tolerance (1.4345451 for n=6: scipy's power there is 0.80000019).
  CHECK(min_detectable_effect(1.0, 3, 0.05) == Approx(3.264043549699571).epsilon(1e-8));
  CHECK(min_detectable_effect(1.0, 6, 0.05) == Approx(1.4345447820404011).epsilon(1e-8));
  CHECK(min_detectable_effect(1.0, 6, 0.01) == Approx(2.1093485146611384).epsilon(1e-8));
  CHECK(min_detectable_effect(1.0, 16, 0.05) == Approx(0.7494656445135548).epsilon(1e-8));
  CHECK(min_detectable_effect(0.013, 6, 0.05) == Approx(0.013 * 1.4345447820404011).epsilon(1e-8));  // scales with sd
  CHECK(min_detectable_effect(1.0, 6, 0.05) == Approx(1.4345451395119289).epsilon(1e-6));  // statsmodels 0.15.0
  for (const int n : {3, 6, 16}) CHECK(paired_t_power(min_detectable_effect(1.0, n, 0.05), 1.0, n, 0.05) == Approx(0.8).margin(1e-9));
  // TTestPower().power(effect_size=0.5, nobs=10, alpha=0.05).
  CHECK(paired_t_power(0.5, 1.0, 10, 0.05) == Approx(0.2931756065140767).epsilon(1e-7));
  CHECK(paired_t_power(-0.5, 1.0, 10, 0.05) == Approx(0.2931756065140767).epsilon(1e-7));  // two-sided
  CHECK(paired_t_power(0.0, 1.0, 10, 0.05) == Approx(0.05));
  // solve_power(effect_size=0.01/0.013, alpha=0.05, power=0.8) = 15.30 pairs: 16 are needed.
  CHECK(pairs_for_effect(0.01, 0.013, 0.05) == 16);
  CHECK(paired_t_power(0.01, 0.013, 16, 0.05) >= 0.8);
  CHECK(paired_t_power(0.01, 0.013, 15, 0.05) < 0.8);
  CHECK(pairs_for_effect(0.01, 0.013, 0.05, 0.8, 10) == -1);  // not within the cap
  CHECK(std::isnan(min_detectable_effect(0.0, 6, 0.05)));
  CHECK(std::isnan(min_detectable_effect(0.01, 1, 0.05)));
  // statsmodels' ttost_paired(x, 0, -m, m)[0]: the larger one-sided p.
  const std::vector<double> x{0.004, -0.002, 0.001, 0.003, -0.001, 0.0005};
  CHECK(tost_p_value(x, 0.01) == Approx(9.801539453141832e-05).epsilon(1e-6));
  CHECK(tost_p_value(x, 0.002) == Approx(0.14938823001073437).epsilon(1e-7));
  CHECK(std::isnan(tost_p_value({0.001}, 0.01)));
}

TEST_CASE("stats: distribution-free interval of a median from order statistics", "[analysis][stats]") {
  // n = 20 at 95%: k = 6 (1 - 2 P(Bin(20, 1/2) <= 5) = 0.9586; k = 7 gives 0.8847), so x_(6) and x_(15);
  // scipy: 1 - 2 * binom.cdf(5, 20, 0.5) = 0.958610534667969.
  std::vector<double> x;
  for (int i = 20; i >= 1; --i) x.push_back(i * 0.1);
  double cov = 0;
  const Interval ci = median_interval(x, 0.95, &cov);
  CHECK(ci.lo == Approx(0.6));
  CHECK(ci.hi == Approx(1.5));
  CHECK(cov == Approx(0.958610534667969).epsilon(1e-12));
  // n = 6: only k = 1 (coverage 1 - 2/64 = 0.96875); n = 5 has none at 95%.
  CHECK(median_interval({3, 1, 2, 6, 5, 4}, 0.95, &cov).lo == 1);
  CHECK(cov == Approx(0.96875));
  CHECK(std::isnan(median_interval({1, 2, 3, 4, 5}, 0.95).lo));
}
