#pragma once
// acc and acc_norm from per-choice log-likelihoods, as lm-evaluation-harness
// computes them: the prediction is the first maximum (numpy's argmax) of the
// log-likelihoods, or of the log-likelihoods divided by the answers' lengths
// (here UTF-8 bytes); stderr is the sample standard deviation over items / sqrt(n).
#include <cstdint>
#include <vector>

namespace prism {

struct ChoiceScores {
  std::vector<double> loglikelihood;  // per choice: sum of log p over the continuation tokens
  std::vector<int64_t> bytes;         // per choice: UTF-8 bytes of the answer text
  int label = 0;
};

struct Accuracy {
  double acc = 0, acc_norm = 0;
  double acc_stderr = 0, acc_norm_stderr = 0;  // NaN below 2 items
  int64_t n = 0;
  std::vector<int> pred, pred_norm;  // per item
};

int first_argmax(const std::vector<double>& v);
Accuracy accuracy(const std::vector<ChoiceScores>& items);

}  // namespace prism
