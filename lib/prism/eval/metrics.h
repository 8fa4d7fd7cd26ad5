#pragma once
// acc, acc_norm and acc_bytes from per-choice log-likelihoods, as
// lm-evaluation-harness computes them: the prediction is the first maximum
// (numpy's argmax) of the log-likelihoods (acc), of the log-likelihoods divided
// by the answers' lengths in characters (acc_norm: Python's len() of the answer
// text), or divided by their UTF-8 bytes (acc_bytes); stderr is the sample
// standard deviation over items / sqrt(n).
#include <cstdint>
#include <vector>

namespace prism {

struct ChoiceScores {
  std::vector<double> loglikelihood;  // per choice: sum of log p over the continuation tokens
  std::vector<int64_t> chars;         // per choice: characters (code points) of the answer text
  int label = 0;
  std::vector<int64_t> bytes;         // per choice: UTF-8 bytes of the answer text (empty: no acc_bytes)
};

struct Accuracy {
  double acc = 0, acc_norm = 0, acc_bytes = 0;  // acc_bytes NaN when no item has byte lengths
  double acc_stderr = 0, acc_norm_stderr = 0, acc_bytes_stderr = 0;  // NaN below 2 items
  int64_t n = 0;
  std::vector<int> pred, pred_norm, pred_bytes;  // per item (pred_bytes empty without byte lengths)
};

int first_argmax(const std::vector<double>& v);
// Throws prism::Error when an item's lengths do not match its log-likelihoods.
Accuracy accuracy(const std::vector<ChoiceScores>& items);

}  // namespace prism
