#include "prism/stats/stats.h"

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/non_central_t.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "prism/error.h"

namespace prism {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// P(|T_df| >= |t|).
double two_sided_t(double t, double df) {
  boost::math::students_t dist(df);
  return std::min(1.0, 2 * boost::math::cdf(boost::math::complement(dist, std::abs(t))));
}
}  // namespace

double mean_of(const std::vector<double>& x) {
  if (x.empty()) return kNaN;
  double s = 0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

double sample_sd(const std::vector<double>& x) {
  if (x.size() < 2) return kNaN;
  const double m = mean_of(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

double mean_stderr(const std::vector<double>& x) {
  return sample_sd(x) / std::sqrt(static_cast<double>(x.size()));
}

double t_quantile(double confidence, double df) {
  if (!(confidence > 0 && confidence < 1))
    throw Error("confidence level must lie strictly between 0 and 1", "--confidence", "use e.g. 0.95");
  if (!(df > 0)) return kNaN;
  boost::math::students_t dist(df);
  return boost::math::quantile(dist, 0.5 + confidence / 2);
}

Interval mean_interval(const std::vector<double>& x, double confidence) {
  if (x.size() < 2) return {kNaN, kNaN};
  const double half = t_quantile(confidence, static_cast<double>(x.size() - 1)) * mean_stderr(x);
  const double m = mean_of(x);
  return {m - half, m + half};
}

Interval welch_interval(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  if (a.size() < 2 || b.size() < 2) return {kNaN, kNaN};
  const double va = std::pow(sample_sd(a), 2) / static_cast<double>(a.size());
  const double vb = std::pow(sample_sd(b), 2) / static_cast<double>(b.size());
  const double d = mean_of(a) - mean_of(b);
  const double se = std::sqrt(va + vb);
  if (se == 0) return {d, d};
  const double df = (va + vb) * (va + vb) /
                    (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  const double half = t_quantile(confidence, df) * se;
  return {d - half, d + half};
}

double mean_p_value(const std::vector<double>& x) {
  if (x.size() < 2) return kNaN;
  const double m = mean_of(x), se = mean_stderr(x);
  if (se == 0) return m == 0 ? 1.0 : 0.0;
  return two_sided_t(m / se, static_cast<double>(x.size() - 1));
}

double welch_p_value(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) return kNaN;
  const double va = std::pow(sample_sd(a), 2) / static_cast<double>(a.size());
  const double vb = std::pow(sample_sd(b), 2) / static_cast<double>(b.size());
  const double d = mean_of(a) - mean_of(b);
  const double se = std::sqrt(va + vb);
  if (se == 0) return d == 0 ? 1.0 : 0.0;
  const double df = (va + vb) * (va + vb) /
                    (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  return two_sided_t(d / se, df);
}

std::vector<double> holm_adjust(const std::vector<double>& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i)
    if (std::isfinite(p[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> out(p.size(), kNaN);
  const double m = static_cast<double>(order.size());
  double running = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    running = std::max(running, std::min(1.0, p[order[k]] * (m - static_cast<double>(k))));
    out[order[k]] = running;
  }
  return out;
}

double paired_t_power(double effect, double sd, int n, double alpha) {
  if (n < 2 || !(sd > 0) || !std::isfinite(sd) || !std::isfinite(effect) || !(alpha > 0 && alpha < 1)) return kNaN;
  const double df = n - 1;
  const double crit = boost::math::quantile(boost::math::students_t(df), 1 - alpha / 2);
  const double nc = std::abs(effect) / sd * std::sqrt(static_cast<double>(n));
  if (nc == 0) return alpha;
  const boost::math::non_central_t dist(df, nc);
  return boost::math::cdf(boost::math::complement(dist, crit)) + boost::math::cdf(dist, -crit);
}

double min_detectable_effect(double sd, int n, double alpha, double power) {
  if (!std::isfinite(paired_t_power(sd, sd, n, alpha)) || !(power > alpha && power < 1)) return kNaN;
  // Power rises with the standardised effect d: bisect it on [0, hi].
  double lo = 0, hi = 1;
  while (paired_t_power(hi, 1.0, n, alpha) < power) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (paired_t_power(mid, 1.0, n, alpha) < power ? lo : hi) = mid;
  }
  return hi * sd;
}

int pairs_for_effect(double effect, double sd, double alpha, double power, int max_n) {
  if (!std::isfinite(paired_t_power(effect, sd, 2, alpha)) || effect == 0 || !(power > alpha && power < 1)) return -1;
  // Power rises with n: double, then bisect.
  int hi = 2;
  while (paired_t_power(effect, sd, hi, alpha) < power) {
    if (hi >= max_n) return -1;
    hi = std::min(max_n, hi * 2);
  }
  int lo = std::max(2, hi / 2);
  if (paired_t_power(effect, sd, lo, alpha) >= power) return lo;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (paired_t_power(effect, sd, mid, alpha) < power ? lo : hi) = mid;
  }
  return hi;
}

double tost_p_value(const std::vector<double>& x, double margin) {
  if (x.size() < 2 || !(margin > 0)) return kNaN;
  const double m = mean_of(x), se = mean_stderr(x);
  if (se == 0) return std::abs(m) < margin ? 0.0 : 1.0;
  const boost::math::students_t dist(static_cast<double>(x.size() - 1));
  const double p_low = boost::math::cdf(boost::math::complement(dist, (m + margin) / se));  // H0: mean <= -margin
  const double p_high = boost::math::cdf(dist, (m - margin) / se);                         // H0: mean >= margin
  return std::max(p_low, p_high);
}

Interval median_interval(std::vector<double> x, double confidence, double* coverage) {
  const Interval none{kNaN, kNaN};
  if (coverage) *coverage = kNaN;
  const auto n = static_cast<int64_t>(x.size());
  if (n < 1 || !(confidence > 0 && confidence < 1)) return none;
  const boost::math::binomial bin(static_cast<double>(n), 0.5);
  int64_t best = 0;
  for (int64_t k = 1; 2 * k <= n + 1; ++k)
    if (1 - 2 * boost::math::cdf(bin, static_cast<double>(k - 1)) >= confidence) best = k;
  if (best == 0) return none;
  std::sort(x.begin(), x.end());
  if (coverage) *coverage = 1 - 2 * boost::math::cdf(bin, static_cast<double>(best - 1));
  return {x[static_cast<size_t>(best - 1)], x[static_cast<size_t>(n - best)]};
}

double mcnemar_exact_p(int64_t b, int64_t c) {
  if (b < 0 || c < 0) throw Error("negative discordant counts", "mcnemar_exact_p", "count items, not differences");
  const int64_t n = b + c;
  if (n == 0) return 1.0;
  boost::math::binomial dist(static_cast<double>(n), 0.5);
  // Symmetric at 1/2: twice the smaller tail, P(X <= min(b, c)).
  return std::min(1.0, 2 * boost::math::cdf(dist, static_cast<double>(std::min(b, c))));
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;  // tied in both: in neither count
      if (da == 0) ties_a += 1;
      else if (db == 0) ties_b += 1;
      else if ((da > 0) == (db > 0)) concordant += 1;
      else discordant += 1;
    }
  const double n0 = concordant + discordant;
  const double denom = std::sqrt((n0 + ties_a) * (n0 + ties_b));
  return denom > 0 ? (concordant - discordant) / denom : kNaN;
}

}  // namespace prism
