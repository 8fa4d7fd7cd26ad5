#include "prism/eval/tasks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join: the fuzzer compiles this file without prism_lib's precompiled header

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "prism/error.h"

namespace prism {
namespace {

using json = nlohmann::json;

// A malformed line: what is wrong with it.
struct BadLine {
  std::string why;
};

const json& field(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name)) throw BadLine{fmt::format("no field '{}'", name)};
  return j.at(name);
}

std::string text_field(const json& j, const char* name) {
  const json& v = field(j, name);
  if (!v.is_string()) throw BadLine{fmt::format("field '{}' is not a string", name)};
  return v.get<std::string>();
}

// An integer label given as a number or a numeric string ("3").
int64_t integer_label(const json& v, const char* name) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }) && s.size() < 10)
      return std::stoll(s);
  }
  throw BadLine{fmt::format("field '{}' is not an integer label: {}", name, v.dump())};
}

void check_label(int64_t label, size_t choices) {
  if (label < 0 || label >= static_cast<int64_t>(choices))
    throw BadLine{fmt::format("label {} is out of range for {} choices", label, choices)};
}

void check_choices(const std::vector<ChoiceRequest>& choices) {
  if (choices.size() < 2) throw BadLine{fmt::format("{} choice(s); a multiple-choice item needs at least 2", choices.size())};
  for (size_t i = 0; i < choices.size(); ++i)
    if (choices[i].choice.empty()) throw BadLine{fmt::format("choice {} is empty", i)};
}

std::string id_of(const json& j, const char* key) {
  if (j.contains(key)) return j.at(key).is_string() ? j.at(key).get<std::string>() : j.at(key).dump();
  return "";
}

TaskItem hellaswag_item(const json& j) {
  TaskItem item;
  std::string ctx;
  if (j.contains("ctx_a") && j.contains("ctx_b"))
    ctx = text_field(j, "ctx_a") + " " + python_capitalize(text_field(j, "ctx_b"));
  else
    ctx = text_field(j, "ctx");
  std::string query = j.contains("activity_label") ? text_field(j, "activity_label") + ": " + ctx : ctx;
  query = hellaswag_preprocess(query);
  const json& endings = field(j, "endings");
  if (!endings.is_array()) throw BadLine{"field 'endings' is not a list"};
  for (const auto& e : endings) {
    if (!e.is_string()) throw BadLine{"an ending is not a string"};
    std::string choice = hellaswag_preprocess(e.get<std::string>());
    item.choices.push_back({query, " " + choice, choice});
  }
  check_choices(item.choices);
  item.label = static_cast<int>(integer_label(field(j, "label"), "label"));
  check_label(item.label, item.choices.size());
  item.id = id_of(j, "ind");
  return item;
}

TaskItem piqa_item(const json& j, const std::vector<int64_t>& labels, size_t index) {
  TaskItem item;
  const std::string context = "Question: " + text_field(j, "goal") + "\nAnswer:";
  for (const char* key : {"sol1", "sol2"}) {
    std::string sol = text_field(j, key);
    item.choices.push_back({context, " " + sol, sol});
  }
  check_choices(item.choices);
  if (j.contains("label")) {
    item.label = static_cast<int>(integer_label(j.at("label"), "label"));
  } else if (index < labels.size()) {
    item.label = static_cast<int>(labels[index]);
  } else {
    throw BadLine{"no label: the line has no 'label' field and the labels file has no line for it"};
  }
  check_label(item.label, item.choices.size());
  item.id = id_of(j, "id");
  return item;
}

TaskItem arc_item(const json& j) {
  TaskItem item;
  const json& q = field(j, "question");
  // The Hugging Face form (question text, choices {text: [...], label: [...]}) or
  // AI2's original (question {stem, choices [{text, label}]}).
  std::string question;
  std::vector<std::string> texts, keys;
  if (q.is_string()) {
    question = q.get<std::string>();
    const json& choices = field(j, "choices");
    const json& text = field(choices, "text");
    const json& label = field(choices, "label");
    if (!text.is_array() || !label.is_array() || text.size() != label.size())
      throw BadLine{"'choices' must hold lists 'text' and 'label' of equal length"};
    for (size_t i = 0; i < text.size(); ++i) {
      if (!text[i].is_string() || !label[i].is_string()) throw BadLine{"choice texts and labels must be strings"};
      texts.push_back(text[i].get<std::string>());
      keys.push_back(label[i].get<std::string>());
    }
  } else {
    question = text_field(q, "stem");
    const json& choices = field(q, "choices");
    if (!choices.is_array()) throw BadLine{"'question.choices' is not a list"};
    for (const auto& c : choices) {
      texts.push_back(text_field(c, "text"));
      keys.push_back(text_field(c, "label"));
    }
  }
  const std::string context = "Question: " + question + "\nAnswer:";
  for (const auto& t : texts) item.choices.push_back({context, " " + t, t});
  check_choices(item.choices);
  const json& key = field(j, "answerKey");
  std::string answer = key.is_string() ? key.get<std::string>() : key.dump();
  auto it = std::find(keys.begin(), keys.end(), answer);
  if (it == keys.end())
    throw BadLine{fmt::format("answerKey '{}' is not one of the choice labels ({})", answer, fmt::join(keys, ", "))};
  item.label = static_cast<int>(it - keys.begin());
  item.id = id_of(j, "id");
  return item;
}

TaskItem winogrande_item(const json& j) {
  TaskItem item;
  const std::string sentence = text_field(j, "sentence");
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) throw BadLine{"the sentence has no '_' to fill"};
  const std::string rest = python_strip(sentence.substr(blank + 1));
  if (rest.empty()) throw BadLine{"nothing follows the '_': partial scoring needs a suffix"};
  for (const char* key : {"option1", "option2"})
    item.choices.push_back({sentence.substr(0, blank) + text_field(j, key), " " + rest, rest});
  const json& answer = field(j, "answer");
  int64_t a = integer_label(answer, "answer");
  if (a != 1 && a != 2) throw BadLine{fmt::format("answer {} is out of range (1 or 2)", answer.dump())};
  item.label = static_cast<int>(a - 1);
  item.id = id_of(j, "qID");
  return item;
}

std::vector<int64_t> read_labels(const std::string& path) {
  std::vector<int64_t> labels;
  if (path.empty()) return labels;
  std::ifstream in(path);
  if (!in) throw Error("cannot read the labels file", path, "pass PIQA's labels file (e.g. valid-labels.lst) with --labels");
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    line = python_strip(line);
    if (line.empty()) continue;
    if (line != "0" && line != "1")
      throw Error(fmt::format("label '{}' is not 0 or 1", line), fmt::format("{}:{}", path, n),
                  "PIQA labels are one 0 or 1 per line");
    labels.push_back(line == "1" ? 1 : 0);
  }
  return labels;
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"hellaswag", "piqa", "arc_easy", "winogrande"};
  return names;
}

Task parse_task(const std::string& name) {
  const auto& names = task_names();
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw Error(fmt::format("unknown task '{}'", name), "--task", fmt::format("use one of: {}", fmt::join(names, ", ")));
  return static_cast<Task>(it - names.begin());
}

std::string task_name(Task t) { return task_names().at(static_cast<size_t>(t)); }

std::string task_convention(Task t) {
  const std::string common =
      "zero-shot, lm-evaluation-harness conventions: acc = argmax of the summed log-likelihood of the continuation "
      "tokens; acc_norm = argmax of that sum divided by the answer text's length in characters (Python's len(), "
      "no leading space); acc_bytes = the same divided by its UTF-8 bytes (the harness's acc_bytes); stderr = "
      "sample sd / sqrt(n)";
  switch (t) {
    case Task::HellaSwag:
      return common + "; context = preprocess(activity_label + ': ' + ctx_a + ' ' + ctx_b.capitalize()), "
                      "continuation = ' ' + preprocess(ending)";
    case Task::Piqa: return common + "; context = 'Question: ' + goal + '\\nAnswer:', continuation = ' ' + sol";
    case Task::ArcEasy:
      return common + "; context = 'Question: ' + question + '\\nAnswer:', continuation = ' ' + choice text";
    case Task::WinoGrande:
      return common + "; partial scoring: context = sentence up to '_' + option, continuation = ' ' + the rest of "
                      "the sentence (the same for both options, so acc_norm equals acc)";
  }
  return common;
}

std::string hellaswag_preprocess(const std::string& text) {
  std::string s = python_strip(text);
  // " [title]" -> ". "
  for (size_t p = 0; (p = s.find(" [title]", p)) != std::string::npos; p += 2) s.replace(p, 8, ". ");
  // re.sub(r"\[.*?\]", "", s): the shortest [...] on one line.
  std::string dropped;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '[') {
      size_t close = s.find_first_of("]\n", i + 1);
      if (close != std::string::npos && s[close] == ']') {
        i = close + 1;
        continue;
      }
    }
    dropped += s[i++];
  }
  // "  " -> " ", one left-to-right pass (as str.replace).
  std::string out;
  for (size_t i = 0; i < dropped.size();) {
    if (dropped.compare(i, 2, "  ") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += dropped[i++];
    }
  }
  return out;
}

TaskData read_task(Task task, const std::string& path, const TaskReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot read the task file", path,
                "download the task's public file (see docs/analysis.md) and pass it with --data");
  const std::vector<int64_t> labels = task == Task::Piqa ? read_labels(options.labels_path) : std::vector<int64_t>{};
  TaskData data;
  std::string line;
  size_t index = 0;  // non-empty lines so far: PIQA's labels file is aligned with them
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (python_strip(line).empty()) continue;
    const size_t this_index = index++;
    try {
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e400)
        throw BadLine{fmt::format("not valid JSON ({})", e.what())};
      }
      TaskItem item;
      switch (task) {
        case Task::HellaSwag: item = hellaswag_item(j); break;
        case Task::Piqa: item = piqa_item(j, labels, this_index); break;
        case Task::ArcEasy: item = arc_item(j); break;
        case Task::WinoGrande: item = winogrande_item(j); break;
      }
      item.line = n;
      data.items.push_back(std::move(item));
    } catch (const BadLine& bad) {
      const std::string where = fmt::format("{}:{}", path, n);
      if (!options.skip_bad)
        throw Error(fmt::format("malformed {} item: {}", task_name(task), bad.why), where,
                    "fix or remove the line, or pass --on-error skip to leave such lines out");
      data.skipped.push_back(fmt::format("{}: {}", where, bad.why));
    }
    if (options.limit > 0 && static_cast<int64_t>(data.items.size()) >= options.limit) break;
  }
  if (task == Task::Piqa && !labels.empty() && options.limit == 0 && labels.size() != index)
    throw Error(fmt::format("the labels file has {} labels for {} items", labels.size(), index), options.labels_path,
                "pass the labels file that belongs to this PIQA split (valid.jsonl goes with valid-labels.lst)");
  if (data.items.empty())
    throw Error(fmt::format("no {} items", task_name(task)), path, "check that --task matches the file");
  return data;
}

}  // namespace prism
