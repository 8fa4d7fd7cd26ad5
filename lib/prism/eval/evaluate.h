#pragma once
// One zero-shot task end to end: items -> requests -> log-likelihoods -> acc,
// acc_norm; plus the per-choice record (JSON) that lets anyone recompute the
// metrics, and the /eval/<task> group of run.h5.
#include <map>
#include <string>
#include <vector>

#include "prism/data/tokenizer.h"
#include "prism/eval/loglikelihood.h"
#include "prism/eval/metrics.h"
#include "prism/eval/tasks.h"
#include "prism/model/gpt.h"
#include "prism/store/result_group.h"

namespace prism {

struct TaskEvaluation {
  Task task = Task::HellaSwag;
  std::vector<TaskItem> items;
  std::vector<std::vector<EncodedRequest>> requests;     // [item][choice]
  std::vector<std::vector<ContinuationScore>> scores;    // [item][choice]
  Accuracy accuracy;
};

TaskEvaluation evaluate_task(GPT& model, const Gpt2Tokenizer& tokenizer, Task task, std::vector<TaskItem> items,
                             const ScoreOptions& options = {});

// Per item and choice: context, continuation, their token ids, log-likelihood,
// answer characters and bytes, greedy; per item: label, pred, pred_norm,
// pred_bytes; and the totals.
std::string evaluation_json(const TaskEvaluation& e);

// acc, acc_norm, acc_bytes, n and their stderrs (scalars) and the per-item
// label / pred / pred_norm / pred_bytes, with the convention and `attributes`
// as attributes.
ResultGroup evaluation_group(const TaskEvaluation& e, const std::map<std::string, std::string>& attributes);

}  // namespace prism
