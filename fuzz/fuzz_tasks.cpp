// The four zero-shot task readers (HellaSwag, PIQA, ARC-Easy, WinoGrande JSONL)
// on arbitrary file contents. The first input byte picks the task (low 2 bits),
// skip_bad (bit 2) and a limit of 3 items (bit 3); for PIQA, text after a line
// "#%labels" is the labels file. Items read must be well formed: at least two
// choices, each with its text, a label among them, 1-based lines increasing,
// and where the line gives its label as a JSON integer (HellaSwag, PIQA), that
// very label.
#include <nlohmann/json.hpp>

#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "prism/eval/tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  if (size < 1) return 0;
  const auto task = static_cast<prism::Task>(data[0] & 3);
  prism::TaskReadOptions options;
  options.skip_bad = (data[0] & 4) != 0;
  options.limit = (data[0] & 8) ? 3 : 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (task == prism::Task::Piqa) {
    const size_t at = text.find("\n#%labels\n");
    if (at != std::string_view::npos) {
      options.labels_path = scratch.write("labels.lst", text.substr(at + 10));
      text = text.substr(0, at + 1);
    }
  }
  const std::string path = scratch.write("task.jsonl", text);
  std::vector<std::string_view> lines;  // 1-based: lines[n - 1] is line n, as std::getline splits
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  prism::fuzz::expect_clean([&] {
    const prism::TaskData d = prism::read_task(task, path, options);
    if (options.limit > 0 && static_cast<int64_t>(d.items.size()) > options.limit) prism::fuzz::finding("more items than the limit");
    if (!options.skip_bad && !d.skipped.empty()) prism::fuzz::finding("lines skipped without skip_bad");
    int64_t last_line = 0;
    for (const auto& item : d.items) {
      if (item.line <= last_line) prism::fuzz::finding("item lines are not increasing");
      last_line = item.line;
      if (item.choices.size() < 2) prism::fuzz::finding("an item with fewer than 2 choices");
      if (item.label < 0 || item.label >= static_cast<int>(item.choices.size())) prism::fuzz::finding("a label outside the choices");
      if (task == prism::Task::HellaSwag || task == prism::Task::Piqa) {
        const auto j = nlohmann::json::parse(lines.at(static_cast<size_t>(item.line - 1)), nullptr, false);
        if (j.is_object() && j.contains("label") && j["label"].is_number_integer() && j["label"].get<int64_t>() != item.label)
          prism::fuzz::finding("the item's label is not the line's label");
      }
      for (const auto& c : item.choices)
        if (c.choice.empty() || c.continuation.empty()) prism::fuzz::finding("an empty choice or continuation");
    }
  });
  return 0;
}
