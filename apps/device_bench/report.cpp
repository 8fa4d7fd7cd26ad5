#include "report.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <stdexcept>

namespace prism::device_bench {

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

std::string json_value(const Field& f) {
  if (auto s = std::get_if<std::string>(&f)) return json_string(*s);
  if (auto i = std::get_if<long long>(&f)) return std::to_string(*i);
  if (auto b = std::get_if<bool>(&f)) return *b ? "true" : "false";
  const double d = std::get<double>(f);
  return std::isfinite(d) ? fmt::format("{:.6g}", d) : "null";
}
}  // namespace

void Report::record(const std::string& bench, const std::map<std::string, Field>& fields) const {
  if (json_path_.empty()) return;
  std::string line = "{\"bench\": " + json_string(bench);
  for (const auto& [k, v] : fields) line += ", " + json_string(k) + ": " + json_value(v);
  line += "}\n";
  std::ofstream out(json_path_, std::ios::app);
  if (!out) throw std::runtime_error("cannot append to " + json_path_);
  out << line;
}

}  // namespace prism::device_bench
