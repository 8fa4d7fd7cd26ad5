#pragma once
// How prism-device-bench reports: one human line per measurement on stdout and,
// with --json FILE, one JSON object per line appended to FILE (results.jsonl).
#include <map>
#include <string>
#include <variant>

namespace prism::device_bench {

using Field = std::variant<std::string, double, long long, bool>;

class Report {
 public:
  explicit Report(std::string json_path) : json_path_(std::move(json_path)) {}
  // Appends {"bench": name, fields...} to the JSON file (if any).
  void record(const std::string& bench, const std::map<std::string, Field>& fields) const;

 private:
  std::string json_path_;
};

}  // namespace prism::device_bench
