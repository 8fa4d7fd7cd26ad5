#pragma once
// Small-sample statistics for the analysis tables: Student-t confidence
// intervals of a mean (over batches or seeds) and Welch's interval for a
// difference of two means. NaN marks "not enough samples", never zero.
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

// Kendall's tau-b rank correlation of paired values (ties counted as scipy.stats.kendalltau
// does); NaN below 2 pairs or when either side is constant.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace prism
