#pragma once
// Small-sample statistics for the analysis tables: Student-t confidence
// intervals of a mean (over batches or seeds), Welch's interval for a
// difference of two means, their two-sided p-values, Holm's adjustment of a
// family of p-values, and McNemar's exact test of paired right/wrong answers.
// NaN marks "not enough samples", never zero.
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

// McNemar's exact two-sided test for paired right/wrong outcomes: b items only
// the first model got right, c only the second. The p-value is the binomial
// test of b out of b + c at 1/2 (scipy.stats.binomtest(b, b + c).pvalue); 1 when
// b + c = 0.
double mcnemar_exact_p(int64_t b, int64_t c);
// Kendall's tau-b rank correlation of paired values (ties counted as scipy.stats.kendalltau
// does); NaN below 2 pairs or when either side is constant.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace prism
