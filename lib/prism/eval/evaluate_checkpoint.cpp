#include "prism/eval/evaluate_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prism/atomic_file.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/store/result_store.h"
#include "prism/store/safetensors.h"

namespace prism {
namespace {

void say(const std::function<void(const std::string&)>& to, const std::string& text) {
  if (to) to(text);
}

TaskData read_request_task(const EvalRequest& r, Task task) {
  TaskReadOptions ro;
  ro.labels_path = r.labels;
  ro.skip_bad = r.on_error == "skip";
  ro.limit = r.limit;
  TaskData data = read_task(task, r.data, ro);
  for (const auto& s : data.skipped) say(r.note, "skipped " + s + "\n");
  return data;
}

void store_evaluation(const EvalRequest& r, const std::string& path, const LoadedModel& lm, const TaskEvaluation& e) {
  RunStore store = open_result_store(path, lm);
  store.write_group("eval/" + task_name(e.task),
                    evaluation_group(e, {{"data", r.data}, {"checkpoint", lm.path}, {"step", std::to_string(lm.step)}}));
  store.close();
  say(r.print, fmt::format("results -> {}:/eval/{}\n", path, task_name(e.task)));
}

}  // namespace

int64_t default_batch_tokens(const torch::Device& device) { return device.is_cuda() ? 16384 : 4096; }

TaskEvaluation evaluate_checkpoint(const EvalRequest& r) {
  const Task task = parse_task(r.task);
  if (r.on_error != "stop" && r.on_error != "skip")
    throw Error(fmt::format("unknown --on-error '{}'", r.on_error), "--on-error", "use stop or skip");
  if (task == Task::Piqa && r.labels.empty())
    say(r.note, "note: no --labels file: every PIQA line must carry a 'label' field\n");
  const std::string store_path = r.store ? result_store_path(r.checkpoint, r.out, "prism eval") : "";
  TaskData data = read_request_task(r, task);

  LoadedModel lm = load_model(r.checkpoint);
  if (r.store) check_result_store(store_path, lm.config.schedule.heads());
  if (lm.config.data.vocab.empty()) lm.config.data.vocab = r.gpt2_vocab;
  const Gpt2Tokenizer tok = open_tokenizer(lm.config, r.vocab);
  lm.model->to(r.placement.device);
  size_t requests = 0;
  for (const auto& item : data.items) requests += item.choices.size();
  say(r.note, fmt::format("eval {}: {} items ({} requests, {} skipped) from {}, model {} (step {}, heads [{}]), "
                          "threads {}, {}\n",
                          task_name(task), data.items.size(), requests, data.skipped.size(), r.data, lm.path, lm.step,
                          fmt::join(lm.config.schedule.heads(), ","), torch::get_num_threads(),
                          r.placement.describe()));
  ScoreOptions so;
  so.batch_tokens = r.batch_tokens > 0 ? r.batch_tokens : default_batch_tokens(r.placement.device);
  so.backend = r.placement.backend;
  so.progress = r.progress;
  TaskEvaluation e = evaluate_task(lm.model, tok, task, std::move(data.items), so);
  const Accuracy& a = e.accuracy;
  say(r.print, fmt::format("{}: acc {:.4f} +- {:.4f}, acc_norm {:.4f} +- {:.4f} (acc_bytes {:.4f}), n {}\n({})\n",
                           task_name(task), a.acc, a.acc_stderr, a.acc_norm, a.acc_norm_stderr, a.acc_bytes, a.n,
                           task_convention(task)));
  if (!r.dump.empty()) {
    write_file_atomic(r.dump, evaluation_json(e));
    say(r.print, fmt::format("per-choice log-likelihoods -> {}\n", r.dump));
  }
  if (r.store) store_evaluation(r, store_path, lm, e);
  return e;
}

}  // namespace prism
