#include "prism/eval/metrics.h"

#include <fmt/format.h>

#include "prism/analysis/stats.h"
#include "prism/error.h"

namespace prism {

int first_argmax(const std::vector<double>& v) {
  int best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int>(i);
  return best;
}

Accuracy accuracy(const std::vector<ChoiceScores>& items) {
  Accuracy a;
  std::vector<double> hit, hit_norm;
  for (const auto& item : items) {
    if (item.loglikelihood.size() != item.bytes.size() || item.loglikelihood.empty())
      throw Error(fmt::format("{} log-likelihoods for {} answer lengths", item.loglikelihood.size(), item.bytes.size()),
                  "accuracy", "score every choice of every item");
    std::vector<double> normed;
    for (size_t i = 0; i < item.bytes.size(); ++i)
      normed.push_back(item.loglikelihood[i] / static_cast<double>(item.bytes[i]));
    a.pred.push_back(first_argmax(item.loglikelihood));
    a.pred_norm.push_back(first_argmax(normed));
    hit.push_back(a.pred.back() == item.label ? 1.0 : 0.0);
    hit_norm.push_back(a.pred_norm.back() == item.label ? 1.0 : 0.0);
  }
  a.n = static_cast<int64_t>(items.size());
  a.acc = mean_of(hit);
  a.acc_norm = mean_of(hit_norm);
  a.acc_stderr = mean_stderr(hit);
  a.acc_norm_stderr = mean_stderr(hit_norm);
  return a;
}

}  // namespace prism
