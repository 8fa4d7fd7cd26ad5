#include "prism/eval/metrics.h"

#include <fmt/format.h>

#include <limits>

#include "prism/error.h"
#include "prism/stats/stats.h"

namespace prism {

int first_argmax(const std::vector<double>& v) {
  int best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int>(i);
  return best;
}

namespace {

// The prediction when each log-likelihood is divided by its answer's length.
int normalised_argmax(const std::vector<double>& ll, const std::vector<int64_t>& length) {
  std::vector<double> normed;
  for (size_t i = 0; i < length.size(); ++i) normed.push_back(ll[i] / static_cast<double>(length[i]));
  return first_argmax(normed);
}

}  // namespace

Accuracy accuracy(const std::vector<ChoiceScores>& items) {
  Accuracy a;
  std::vector<double> hit, hit_norm, hit_bytes;
  bool with_bytes = !items.empty();
  for (const auto& item : items) with_bytes = with_bytes && !item.bytes.empty();
  for (const auto& item : items) {
    if (item.loglikelihood.size() != item.chars.size() || item.loglikelihood.empty() ||
        (!item.bytes.empty() && item.bytes.size() != item.chars.size()))
      throw Error(fmt::format("{} log-likelihoods for {} answer lengths ({} in bytes)", item.loglikelihood.size(),
                              item.chars.size(), item.bytes.size()),
                  "accuracy", "score every choice of every item");
    a.pred.push_back(first_argmax(item.loglikelihood));
    a.pred_norm.push_back(normalised_argmax(item.loglikelihood, item.chars));
    hit.push_back(a.pred.back() == item.label ? 1.0 : 0.0);
    hit_norm.push_back(a.pred_norm.back() == item.label ? 1.0 : 0.0);
    if (with_bytes) {
      a.pred_bytes.push_back(normalised_argmax(item.loglikelihood, item.bytes));
      hit_bytes.push_back(a.pred_bytes.back() == item.label ? 1.0 : 0.0);
    }
  }
  a.n = static_cast<int64_t>(items.size());
  a.acc = mean_of(hit);
  a.acc_norm = mean_of(hit_norm);
  a.acc_stderr = mean_stderr(hit);
  a.acc_norm_stderr = mean_stderr(hit_norm);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  a.acc_bytes = with_bytes ? mean_of(hit_bytes) : nan;
  a.acc_bytes_stderr = with_bytes ? mean_stderr(hit_bytes) : nan;
  return a;
}

}  // namespace prism
