#pragma once
// Zero-shot multiple-choice tasks in their public file formats, turned into
// (context, continuation) requests exactly as lm-evaluation-harness builds
// them, so scores are comparable with published ones:
//   hellaswag   jsonl: activity_label, ctx_a, ctx_b (or ctx), endings, label.
//               context = preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize()),
//               continuation = " " + preprocess(ending); preprocess: strip, " [title]" -> ". ",
//               drop "[...]", "  " -> " ".
//   piqa        jsonl: goal, sol1, sol2 (+ a labels file, one 0/1 per line, or a label field).
//               context = "Question: " + goal + "\nAnswer:", continuation = " " + sol.
//   arc_easy    jsonl: question (text, or {stem, choices}), choices {text, label}, answerKey.
//               context = "Question: " + question + "\nAnswer:", continuation = " " + choice text.
//   winogrande  jsonl: sentence (one "_"), option1, option2, answer ("1" | "2").
//               Partial scoring: context = sentence before "_" + option, continuation =
//               " " + the rest of the sentence after "_" (stripped): the same for both options.
// `choice` is the text acc_norm divides by (its length in characters, as Python's
// len(); no leading space). Python's str methods are python_text.h's.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/eval/python_text.h"

namespace prism {

enum class Task { HellaSwag, Piqa, ArcEasy, WinoGrande };

Task parse_task(const std::string& name);  // throws prism::Error listing the names
std::string task_name(Task t);
const std::vector<std::string>& task_names();
// The scoring convention in one paragraph (printed by prism eval, stored in /eval).
std::string task_convention(Task t);

struct ChoiceRequest {
  std::string context;       // conditioning text
  std::string continuation;  // scored text (starts with the target delimiter " ")
  std::string choice;        // the answer text itself: its characters normalise acc_norm
};

struct TaskItem {
  int64_t line = 0;  // 1-based line in the task file
  std::string id;
  std::vector<ChoiceRequest> choices;
  int label = 0;     // index of the correct choice
};

struct TaskReadOptions {
  std::string labels_path;  // piqa: the labels file (e.g. valid-labels.lst)
  bool skip_bad = false;    // skip malformed lines (reported) instead of stopping
  int64_t limit = 0;        // read at most this many items (0: all)
};

struct TaskData {
  std::vector<TaskItem> items;
  std::vector<std::string> skipped;  // "file:line: why", with skip_bad
};

// Throws prism::Error naming the file and line for a malformed line or a label
// out of range (unless skip_bad), a missing file, or an empty task.
TaskData read_task(Task task, const std::string& path, const TaskReadOptions& options = {});

// The harness's HellaSwag text clean-up (after Python's str.strip).
std::string hellaswag_preprocess(const std::string& text);

}  // namespace prism
