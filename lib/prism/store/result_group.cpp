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

const char* const kMissingFix = "measure or evaluate first (prism distance / prism eval), or check the file";

ResultArray shaped(const std::string& name, std::vector<uint64_t> shape, size_t n, ResultArray::Type type) {
  ResultArray a;
  a.shape = std::move(shape);
  a.type = type;
  if (a.size() != n)
    throw Error(fmt::format("array '{}' has {} values for shape of {} values", name, n, a.size()), "result group",
                "pass as many values as the shape holds");
  return a;
}

void require_numbers(const ResultArray& a, const std::string& name, const std::string& where) {
  if (a.type == ResultArray::Type::String)
    throw Error(fmt::format("dataset '{}' holds text, not numbers", name), where, "read it as strings");
}

}  // namespace

void ResultGroup::set_real(const std::string& name, std::vector<uint64_t> shape, std::vector<double> values) {
  ResultArray a = shaped(name, std::move(shape), values.size(), ResultArray::Type::Float64);
  a.real = std::move(values);
  arrays[name] = std::move(a);
}

void ResultGroup::set_integer(const std::string& name, std::vector<uint64_t> shape, std::vector<int64_t> values) {
  ResultArray a = shaped(name, std::move(shape), values.size(), ResultArray::Type::Int64);
  a.integer = std::move(values);
  arrays[name] = std::move(a);
}

void ResultGroup::set_int32(const std::string& name, std::vector<uint64_t> shape, const std::vector<int32_t>& values) {
  ResultArray a = shaped(name, std::move(shape), values.size(), ResultArray::Type::Int32);
  a.integer.assign(values.begin(), values.end());
  arrays[name] = std::move(a);
}

void ResultGroup::set_uint64(const std::string& name, std::vector<uint64_t> shape, std::vector<uint64_t> values) {
  ResultArray a = shaped(name, std::move(shape), values.size(), ResultArray::Type::UInt64);
  a.unsigned_integer = std::move(values);
  arrays[name] = std::move(a);
}

void ResultGroup::set_strings(const std::string& name, std::vector<uint64_t> shape, std::vector<std::string> values) {
  ResultArray a = shaped(name, std::move(shape), values.size(), ResultArray::Type::String);
  a.strings = std::move(values);
  arrays[name] = std::move(a);
}

const ResultArray& ResultGroup::at(const std::string& name, const std::string& where) const {
  auto it = arrays.find(name);
  if (it == arrays.end()) throw Error(fmt::format("no dataset '{}'", name), where, kMissingFix);
  return it->second;
}

std::vector<double> ResultGroup::reals(const std::string& name, const std::string& where) const {
  const ResultArray& a = at(name, where);
  require_numbers(a, name, where);
  if (a.type == ResultArray::Type::UInt64) return std::vector<double>(a.unsigned_integer.begin(), a.unsigned_integer.end());
  if (a.is_integer()) return std::vector<double>(a.integer.begin(), a.integer.end());
  return a.real;
}

std::vector<int64_t> ResultGroup::integers(const std::string& name, const std::string& where) const {
  const ResultArray& a = at(name, where);
  require_numbers(a, name, where);
  if (a.type == ResultArray::Type::UInt64)
    return std::vector<int64_t>(a.unsigned_integer.begin(), a.unsigned_integer.end());
  if (a.is_integer()) return a.integer;
  std::vector<int64_t> out;
  for (double v : a.real) out.push_back(static_cast<int64_t>(v));
  return out;
}

std::vector<std::string> ResultGroup::strings(const std::string& name, const std::string& where) const {
  const ResultArray& a = at(name, where);
  if (a.type != ResultArray::Type::String)
    throw Error(fmt::format("dataset '{}' holds numbers, not text", name), where, "read it as numbers");
  return a.strings;
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
