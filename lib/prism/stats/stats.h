#pragma once
// Small-sample statistics for the analysis tables: Student-t confidence
// intervals of a mean (over batches or seeds), Welch's interval for a
// difference of two means, their two-sided p-values, Holm's adjustment of a
// family of p-values, and McNemar's exact test of paired right/wrong answers.
// NaN marks "not enough samples", never zero.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace prism {

struct Interval {
  double lo, hi;  // NaN, NaN when it cannot be computed
};

double mean_of(const std::vector<double>& x);
// Sample standard deviation (n - 1 in the denominator); NaN below 2 samples.
double sample_sd(const std::vector<double>& x);
// Standard error of the mean, sd / sqrt(n) (lm-evaluation-harness's stderr of acc).
double mean_stderr(const std::vector<double>& x);

// The two-sided Student-t quantile t_{(1 + confidence) / 2, df}.
double t_quantile(double confidence, double df);

// mean +- t * sd / sqrt(n).
Interval mean_interval(const std::vector<double>& x, double confidence);
// Welch's interval for mean(a) - mean(b) (unequal variances, Welch-Satterthwaite df);
// needs at least 2 samples on each side.
Interval welch_interval(const std::vector<double>& a, const std::vector<double>& b, double confidence);

// Two-sided p-value of the one-sample t-test of mean(x) = 0 (paired differences:
// scipy.stats.ttest_rel); NaN below 2 samples. Every x equal: 1 if they are 0, else 0.
double mean_p_value(const std::vector<double>& x);
// Two-sided p-value of Welch's t-test of mean(a) = mean(b) (scipy.stats.ttest_ind,
// equal_var=False); needs at least 2 samples on each side.
double welch_p_value(const std::vector<double>& a, const std::vector<double>& b);

// Holm's step-down adjustment of a family of p-values (the m finite ones; NaN
// entries stay NaN and do not count): sorted ascending, p_(k) * (m - k + 1),
// made non-decreasing and capped at 1, returned in the input order. Rejecting
// where the adjusted p < alpha keeps the family-wise error rate at alpha.
std::vector<double> holm_adjust(const std::vector<double>& p);

// Power of the two-sided one-sample t-test at level `alpha` (paired differences over n
// pairs) when the true mean is `effect` and the differences' sd is `sd`: P(|T| >
// t_{1-alpha/2, n-1}) with T noncentral t (n - 1 df, noncentrality effect / sd * sqrt(n)),
// as statsmodels' TTestPower computes it. NaN below 2 pairs or without a positive sd.
double paired_t_power(double effect, double sd, int n, double alpha);
// The minimum detectable effect: the |mean| that test detects with probability `power`
// (TTestPower().solve_power(nobs=n, alpha, power) times sd). NaN where the power is NaN.
double min_detectable_effect(double sd, int n, double alpha, double power = 0.8);
// The fewest pairs (>= 2) at which the test detects `effect` with probability `power`;
// -1 when not within `max_n` (or the inputs leave it undefined).
int pairs_for_effect(double effect, double sd, double alpha, double power = 0.8, int max_n = 1000000);
// Two one-sided tests (TOST) of equivalence within +-margin for the mean of x (paired
// differences: statsmodels' ttost_paired): the larger of the p-values of mean <= -margin
// and mean >= margin; below alpha, the mean lies within the margin. NaN below 2 samples.
double tost_p_value(const std::vector<double>& x, double margin);

// A distribution-free interval for the median: the order statistics x_(k) and x_(n-k+1) with
// the largest k whose coverage 1 - 2 P(Bin(n, 1/2) <= k - 1) is at least `confidence`
// (it holds for any continuous distribution of independent draws). NaN, NaN where n is too
// small for any (n < 6 at 95%). `coverage`, if given, receives the interval's exact coverage.
Interval median_interval(std::vector<double> x, double confidence, double* coverage = nullptr);

// The sample median (the mean of the middle two for an even count); 0 for none. Inline, so that
// code outside prism_lib's archive (ops/ in the device build, which has no Boost) needs no stats.cpp.
inline double median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// McNemar's exact two-sided test for paired right/wrong outcomes: b items only
// the first model got right, c only the second. The p-value is the binomial
// test of b out of b + c at 1/2 (scipy.stats.binomtest(b, b + c).pvalue); 1 when
// b + c = 0.
double mcnemar_exact_p(int64_t b, int64_t c);
// Kendall's tau-b rank correlation of paired values (ties counted as scipy.stats.kendalltau
// does); NaN below 2 pairs or when either side is constant.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace prism
