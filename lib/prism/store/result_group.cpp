#include "prism/store/result_group.h"

#include <fmt/format.h>

#include "prism/error.h"

namespace prism {

uint64_t ResultArray::size() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

namespace {
void check_size(const std::string& name, const std::vector<uint64_t>& shape, size_t n) {
  uint64_t expected = 1;
  for (uint64_t d : shape) expected *= d;
  if (expected != n)
    throw Error(fmt::format("array '{}' has {} values for shape of {} values", name, n, expected), "result group",
                "pass as many values as the shape holds");
}
const char* const kMissingFix = "measure or evaluate first (prism distance / prism eval), or check the file";
}  // namespace

void ResultGroup::set_real(const std::string& name, std::vector<uint64_t> shape, std::vector<double> values) {
  check_size(name, shape, values.size());
  ResultArray a;
  a.shape = std::move(shape);
  a.real = std::move(values);
  arrays[name] = std::move(a);
}

void ResultGroup::set_integer(const std::string& name, std::vector<uint64_t> shape, std::vector<int64_t> values) {
  check_size(name, shape, values.size());
  ResultArray a;
  a.shape = std::move(shape);
  a.integer = std::move(values);
  a.is_integer = true;
  arrays[name] = std::move(a);
}

const ResultArray& ResultGroup::at(const std::string& name, const std::string& where) const {
  auto it = arrays.find(name);
  if (it == arrays.end()) throw Error(fmt::format("no dataset '{}'", name), where, kMissingFix);
  return it->second;
}

std::vector<double> ResultGroup::reals(const std::string& name, const std::string& where) const {
  const ResultArray& a = at(name, where);
  if (!a.is_integer) return a.real;
  return std::vector<double>(a.integer.begin(), a.integer.end());
}

std::vector<int64_t> ResultGroup::integers(const std::string& name, const std::string& where) const {
  const ResultArray& a = at(name, where);
  if (a.is_integer) return a.integer;
  std::vector<int64_t> out;
  for (double v : a.real) out.push_back(static_cast<int64_t>(v));
  return out;
}

double ResultGroup::number(const std::string& name, const std::string& where) const {
  auto it = numbers.find(name);
  if (it == numbers.end()) throw Error(fmt::format("no attribute '{}'", name), where, kMissingFix);
  return it->second;
}

std::string ResultGroup::string(const std::string& name, const std::string& where) const {
  auto it = text.find(name);
  if (it == text.end()) throw Error(fmt::format("no attribute '{}'", name), where, kMissingFix);
  return it->second;
}

}  // namespace prism
