#include "prism/schedule/head_schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <ostream>

#include "prism/error.h"

namespace prism {

HeadSchedule::HeadSchedule(std::vector<int> heads) : heads_(std::move(heads)) {}

HeadSchedule HeadSchedule::uniform(int n_layer, int heads) {
  return HeadSchedule(std::vector<int>(static_cast<size_t>(n_layer), heads));
}

HeadSchedule HeadSchedule::from_staircase(const std::vector<Stair>& stairs, int d_model) {
  std::vector<int> heads;
  for (size_t i = 0; i < stairs.size(); ++i) {
    const Stair& s = stairs[i];
    std::string where = fmt::format("staircase step {} ({}, {})", i + 1, s.head_dim, s.layers);
    if (s.head_dim <= 0 || d_model % s.head_dim != 0)
      throw Error(fmt::format("head_dim {} does not divide d_model = {}", s.head_dim, d_model), where,
                  "use a head width that divides d_model (e.g. 256, 128, 64 for d_model 768)");
    if (s.layers <= 0)
      throw Error(fmt::format("layer count {} must be positive", s.layers), where, "give each step at least one layer");
    heads.insert(heads.end(), static_cast<size_t>(s.layers), d_model / s.head_dim);
  }
  return HeadSchedule(std::move(heads));
}

// Also reads the forms prism's CSVs carry: "[1, 1, 4]" (summary.csv) and "32 8" (ranking.csv), where
// whitespace alone between two numbers separates them; elsewhere ("3 x 2", "1, 1") it is only spacing.
HeadSchedule HeadSchedule::parse(const std::string& text) {
  std::string s;
  bool gap = false;  // whitespace seen since the last character kept
  for (char c : text) {
    if (c == '[' || c == ']' || std::isspace(static_cast<unsigned char>(c))) {
      gap = true;
      continue;
    }
    if (gap && !s.empty() && std::isdigit(static_cast<unsigned char>(s.back())) && std::isdigit(static_cast<unsigned char>(c)))
      s += ',';
    gap = false;
    s += c;
  }
  auto bad = [&](const std::string& item) {
    return Error(fmt::format("cannot read '{}' in head schedule '{}'", item, text), "head schedule",
                 "write counts separated by commas, with NxK for N repeated K times: 3x3,6x3,12x6");
  };
  auto number = [&](const std::string& item, const std::string& digits) {
    if (digits.empty() || digits.size() > 6) throw bad(item);
    for (char c : digits)
      if (!std::isdigit(static_cast<unsigned char>(c))) throw bad(item);
    return std::stoi(digits);
  };
  std::vector<int> heads;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw bad(item);
    size_t x = item.find('x');
    int count = number(item, item.substr(0, x));
    int repeat = x == std::string::npos ? 1 : number(item, item.substr(x + 1));
    if (repeat <= 0) throw bad(item);
    heads.insert(heads.end(), static_cast<size_t>(repeat), count);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return HeadSchedule(std::move(heads));
}

bool HeadSchedule::is_uniform() const {
  for (int h : heads_)
    if (h != heads_.front()) return false;
  return true;
}

std::vector<std::pair<int, int>> HeadSchedule::runs() const {
  std::vector<std::pair<int, int>> out;
  for (int h : heads_) {
    if (!out.empty() && out.back().first == h)
      ++out.back().second;
    else
      out.emplace_back(h, 1);
  }
  return out;
}

std::string HeadSchedule::compact() const {
  std::vector<std::string> parts;
  for (auto [h, n] : runs()) parts.push_back(n == 1 ? std::to_string(h) : fmt::format("{}x{}", h, n));
  return fmt::format("{}", fmt::join(parts, ","));
}

std::string HeadSchedule::list() const { return fmt::format("[{}]", fmt::join(heads_, ", ")); }

std::ostream& operator<<(std::ostream& os, const HeadSchedule& s) { return os << s.compact(); }

}  // namespace prism
