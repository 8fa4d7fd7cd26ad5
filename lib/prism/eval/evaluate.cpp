#include "prism/eval/evaluate.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

namespace prism {

TaskEvaluation evaluate_task(GPT& model, const Gpt2Tokenizer& tokenizer, Task task, std::vector<TaskItem> items,
                             const ScoreOptions& options) {
  TaskEvaluation e;
  e.task = task;
  e.items = std::move(items);
  std::vector<EncodedRequest> flat;
  for (const auto& item : e.items) {
    e.requests.emplace_back();
    for (const auto& c : item.choices) {
      e.requests.back().push_back(encode_request(tokenizer, c.context, c.continuation));
      flat.push_back(e.requests.back().back());
    }
  }
  auto scores = score_requests(model, flat, options);
  std::vector<ChoiceScores> per_item;
  size_t k = 0;
  for (const auto& item : e.items) {
    ChoiceScores cs;
    cs.label = item.label;
    e.scores.emplace_back();
    for (const auto& c : item.choices) {
      e.scores.back().push_back(scores[k++]);
      cs.loglikelihood.push_back(e.scores.back().back().loglikelihood);
      cs.chars.push_back(python_len(c.choice));
      cs.bytes.push_back(static_cast<int64_t>(c.choice.size()));
    }
    per_item.push_back(std::move(cs));
  }
  e.accuracy = accuracy(per_item);
  return e;
}

std::string evaluation_json(const TaskEvaluation& e) {
  using json = nlohmann::json;
  json items = json::array();
  for (size_t i = 0; i < e.items.size(); ++i) {
    const TaskItem& item = e.items[i];
    json choices = json::array();
    for (size_t c = 0; c < item.choices.size(); ++c) {
      const auto& r = item.choices[c];
      choices.push_back({{"context", r.context},
                         {"continuation", r.continuation},
                         {"choice", r.choice},
                         {"context_tokens", e.requests[i][c].context},
                         {"continuation_tokens", e.requests[i][c].continuation},
                         {"loglikelihood", e.scores[i][c].loglikelihood},
                         {"chars", python_len(r.choice)},
                         {"bytes", r.choice.size()},
                         {"greedy", e.scores[i][c].greedy}});
    }
    items.push_back({{"line", item.line},
                     {"id", item.id},
                     {"label", item.label},
                     {"pred", e.accuracy.pred[i]},
                     {"pred_norm", e.accuracy.pred_norm[i]},
                     {"pred_bytes", i < e.accuracy.pred_bytes.size() ? e.accuracy.pred_bytes[i] : -1},
                     {"choices", choices}});
  }
  json out = {{"task", task_name(e.task)},
              {"convention", task_convention(e.task)},
              {"n", e.accuracy.n},
              {"acc", e.accuracy.acc},
              {"acc_norm", e.accuracy.acc_norm},
              {"acc_bytes", e.accuracy.acc_bytes},
              {"items", items}};
  out["acc_stderr"] = std::isfinite(e.accuracy.acc_stderr) ? json(e.accuracy.acc_stderr) : json();
  out["acc_norm_stderr"] = std::isfinite(e.accuracy.acc_norm_stderr) ? json(e.accuracy.acc_norm_stderr) : json();
  out["acc_bytes_stderr"] = std::isfinite(e.accuracy.acc_bytes_stderr) ? json(e.accuracy.acc_bytes_stderr) : json();
  return out.dump(1) + "\n";
}

ResultGroup evaluation_group(const TaskEvaluation& e, const std::map<std::string, std::string>& attributes) {
  ResultGroup g;
  const Accuracy& a = e.accuracy;
  g.set_real("acc", {}, {a.acc});
  g.set_real("acc_norm", {}, {a.acc_norm});
  g.set_integer("n", {}, {a.n});
  g.set_real("acc_stderr", {}, {a.acc_stderr});
  g.set_real("acc_norm_stderr", {}, {a.acc_norm_stderr});
  g.set_real("acc_bytes", {}, {a.acc_bytes});
  g.set_real("acc_bytes_stderr", {}, {a.acc_bytes_stderr});
  const auto n = static_cast<uint64_t>(e.items.size());
  std::vector<int64_t> label, pred, pred_norm, pred_bytes, line;
  for (size_t i = 0; i < e.items.size(); ++i) {
    label.push_back(e.items[i].label);
    line.push_back(e.items[i].line);
    pred.push_back(a.pred[i]);
    pred_norm.push_back(a.pred_norm[i]);
    pred_bytes.push_back(i < a.pred_bytes.size() ? a.pred_bytes[i] : -1);
  }
  g.set_integer("items/line", {n}, line);
  g.set_integer("items/label", {n}, label);
  g.set_integer("items/pred", {n}, pred);
  g.set_integer("items/pred_norm", {n}, pred_norm);
  g.set_integer("items/pred_bytes", {n}, pred_bytes);
  g.text = attributes;
  g.text["convention"] = task_convention(e.task);
  return g;
}

}  // namespace prism
