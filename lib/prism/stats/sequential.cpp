#include "prism/stats/sequential.h"

#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <tuple>

#include "prism/error.h"
#include "prism/stats/stats.h"

namespace prism {

void SequentialDesign::check() const {
  const char* fix = "e.g. sequential: {first: 3, step: 3, cap: 21}";
  if (first < 2) throw Error(fmt::format("sequential.first is {}: a paired t needs 2 pairs", first), "sequential.first", fix);
  if (step < 1) throw Error(fmt::format("sequential.step is {}", step), "sequential.step", "add 1 pair per look or more");
  if (cap < first) throw Error(fmt::format("sequential.cap {} is below first {}", cap, first), "sequential.cap", fix);
  if (!(alpha > 0 && alpha < 1)) throw Error("sequential alpha must lie in (0, 1)", "alpha", "use 0.05");
  if (!(margin >= 0) || !std::isfinite(margin))
    throw Error("the equivalence margin must be 0 or more", "margin", "use the paper's effect, e.g. 0.0144");
}

int SequentialDesign::looks() const { return 1 + (cap - first + step - 1) / step; }

int SequentialDesign::pairs_at(int look) const { return std::min(cap, first + look * step); }

int SequentialDesign::look_of(int pairs) const {
  for (int k = 0; k < looks(); ++k)
    if (pairs_at(k) == pairs) return k;
  return -1;
}

namespace {

// The a-quantile of the smallest p-value over the design's looks, with the paired
// differences' sd 1 and mean 0 (the statistics are pivotal: any sd gives the same), taken at
// the conservative end of its 99% band (the order statistic 2.33 binomial sds below a N).
double min_p_quantile(const SequentialDesign& d, double a, bool one_sided) {
  constexpr int kSims = 100000;
  std::mt19937_64 rng(0x5e9e7a1ULL + (one_sided ? 1 : 0));
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> min_p(kSims);
  std::vector<boost::math::students_t> t;
  std::vector<double> screen;  // |t| (two-sided) or -t (one-sided) at p = 0.1
  for (int k = 0; k < d.looks(); ++k) {
    t.emplace_back(d.pairs_at(k) - 1);
    screen.push_back(boost::math::quantile(t.back(), one_sided ? 0.9 : 0.95));
  }
  for (auto& mp : min_p) {
    double sum = 0, sq = 0;
    int n = 0;
    mp = 1;
    for (int k = 0; k < d.looks(); ++k) {
      for (; n < d.pairs_at(k); ++n) {
        const double x = z(rng);
        sum += x;
        sq += x * x;
      }
      const double mean = sum / n, var = (sq - n * mean * mean) / (n - 1);
      const double stat = mean / std::sqrt(var / n);
      // Only p-values below 0.1 can reach the quantile (a <= 0.05): the rest skip the cdf.
      const auto& tk = t[static_cast<size_t>(k)];
      if (one_sided ? stat > -screen[static_cast<size_t>(k)] : std::abs(stat) < screen[static_cast<size_t>(k)]) continue;
      const double p = one_sided ? boost::math::cdf(tk, stat)  // H0: mean >= 0, low t rejects
                                 : 2 * boost::math::cdf(boost::math::complement(tk, std::abs(stat)));
      mp = std::min(mp, p);
    }
  }
  const double expect = a * kSims, band = 2.33 * std::sqrt(expect * (1 - a));
  const auto k = static_cast<size_t>(std::max(0.0, std::floor(expect - band)));
  std::nth_element(min_p.begin(), min_p.begin() + static_cast<std::ptrdiff_t>(k), min_p.end());
  return min_p[k];
}

}  // namespace

SequentialLevels sequential_levels(const SequentialDesign& d, int comparisons) {
  d.check();
  if (comparisons < 1) throw Error("a sequential design needs 1 comparison or more", "sequential", "");
  // Deterministic (fixed seeds) and a second's work: kept per design.
  static std::mutex mu;
  static std::map<std::tuple<int, int, int, double, bool, int>, SequentialLevels> cache;
  const auto key = std::make_tuple(d.first, d.step, d.cap, d.alpha, d.margin > 0, comparisons);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const double a = d.alpha / comparisons;
  const SequentialLevels out{min_p_quantile(d, a, false), d.margin > 0 ? min_p_quantile(d, a, true) : 0.0};
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = out;
  return out;
}

namespace {

// The design's levels as critical t values, per look: a p-value is below its level exactly when
// its t statistic is beyond the critical value, so a look needs no cdf per comparison.
struct LookCriticals {
  std::vector<double> difference, equivalence;
};

LookCriticals look_criticals(const SequentialDesign& d, const SequentialLevels& levels) {
  LookCriticals c;
  for (int k = 0; k < d.looks(); ++k) {
    const boost::math::students_t t(d.pairs_at(k) - 1);
    c.difference.push_back(boost::math::quantile(boost::math::complement(t, levels.difference / 2)));
    c.equivalence.push_back(d.margin > 0 ? boost::math::quantile(boost::math::complement(t, levels.equivalence)) : 0.0);
  }
  return c;
}

// Look k of every still-open comparison ("" in `given`) over its first pairs_at(k) pairs: the
// two-sided paired t beyond its critical value gives better/worse, else both one-sided TOST
// statistics beyond theirs give equivalent. (An sd of 0 reads as an infinite statistic, as
// mean_p_value and tost_p_value take it.) Verdicts already given stand.
void look(const SequentialDesign& d, const LookCriticals& crit, int k, const std::vector<std::vector<double>>& diffs,
          std::vector<std::string>& given) {
  const size_t n = static_cast<size_t>(d.pairs_at(k)), kk = static_cast<size_t>(k);
  for (size_t c = 0; c < diffs.size(); ++c) {
    if (diffs[c].size() < n)
      throw Error(fmt::format("a comparison has {} seed pairs; this look needs {} (look {})", diffs[c].size(), n, k + 1),
                  "sequential", "train the missing seeds of every compared schedule and of uniform");
    if (!given[c].empty()) continue;
    const std::vector<double>& x = diffs[c];
    const std::vector<double> first =
        x.size() == n ? std::vector<double>{} : std::vector<double>(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    const std::vector<double>& head = x.size() == n ? x : first;  // a simulation's looks end at the last pair
    const double mean = mean_of(head), se = mean_stderr(head);
    if (std::abs(mean) / se > crit.difference[kk])
      given[c] = mean < 0 ? "better" : "worse";
    else if (d.margin > 0 && (mean + d.margin) / se > crit.equivalence[kk] &&
             (mean - d.margin) / se < -crit.equivalence[kk])
      given[c] = "equivalent";
  }
}

}  // namespace

std::vector<std::vector<std::string>> sequential_history(const SequentialDesign& d,
                                                          const std::vector<std::vector<double>>& diffs, int pairs) {
  const int last = d.look_of(pairs);
  if (last < 0)
    throw Error(fmt::format("{} seed pairs is not a look of the design (first {}, step {}, cap {})", pairs, d.first,
                            d.step, d.cap),
                "sequential", "train seeds up to the next look's count, or report the look before");
  const LookCriticals crit = look_criticals(d, sequential_levels(d, static_cast<int>(diffs.size())));
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> given(diffs.size());
  for (int k = 0; k <= last; ++k) {
    look(d, crit, k, diffs, given);
    out.push_back(given);
  }
  return out;
}

SequentialSim simulate_sequential(const SequentialDesign& d, int comparisons, double effect, double sd, int sims,
                                  uint64_t seed) {
  d.check();
  if (comparisons < 1 || sims < 1 || !(sd > 0))
    throw Error("simulate_sequential needs 1+ comparisons, 1+ studies and a positive sd", "simulate_sequential", "");
  std::mt19937_64 rng(seed);
  // Each seed: uniform's loss noise u, each schedule's s_c; a paired difference is
  // effect + s_c - u, with sd `sd` when u and s_c have sd sd / sqrt(2).
  std::normal_distribution<double> noise(0.0, sd / std::sqrt(2.0));
  const std::string truth = std::abs(effect) < d.margin ? "equivalent" : effect < 0 ? "better" : effect > 0 ? "worse" : "";
  SequentialSim r;
  r.sims = sims;
  double pairs_sum = 0, right = 0;
  const LookCriticals crit = look_criticals(d, sequential_levels(d, comparisons));
  std::vector<std::vector<double>> diffs(static_cast<size_t>(comparisons));
  for (int s = 0; s < sims; ++s) {
    for (auto& x : diffs) x.clear();
    std::vector<std::string> given(static_cast<size_t>(comparisons));
    int used = 0;
    for (int k = 0; k < d.looks(); ++k) {
      const int n = d.pairs_at(k);
      while (static_cast<int>(diffs[0].size()) < n) {
        const double u = noise(rng);
        for (auto& x : diffs) x.push_back(effect + noise(rng) - u);
      }
      look(d, crit, k, diffs, given);
      used = n;
      if (std::all_of(given.begin(), given.end(), [](const std::string& v) { return !v.empty(); })) break;
    }
    pairs_sum += used;
    r.stopped_early += used < d.cap ? 1 : 0;
    bool diff = false, equiv = false;
    for (const auto& v : given) {
      diff = diff || v == "better" || v == "worse";
      equiv = equiv || v == "equivalent";
      right += !truth.empty() && v == truth ? 1 : 0;
    }
    r.any_difference += diff ? 1 : 0;
    r.any_equivalent += equiv ? 1 : 0;
  }
  r.any_difference /= sims;
  r.any_equivalent /= sims;
  r.stopped_early /= sims;
  r.mean_pairs = pairs_sum / sims;
  r.correct_each = right / (static_cast<double>(sims) * comparisons);
  return r;
}

}  // namespace prism
