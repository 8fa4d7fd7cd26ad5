#include "prism/store/table_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "prism/error.h"

namespace prism {

namespace {

enum class Kind { Integer, Real, Text };

Kind column_kind(const Table& t, size_t c) {
  Kind k = Kind::Integer;
  for (const auto& row : t.rows) {
    const Cell& cell = row[c];
    if (std::holds_alternative<std::string>(cell)) return Kind::Text;
    if (!std::holds_alternative<int64_t>(cell)) k = Kind::Real;  // double or empty
  }
  return k;
}

double as_real(const Cell& cell) {
  if (auto* i = std::get_if<int64_t>(&cell)) return double(*i);
  if (auto* d = std::get_if<double>(&cell)) return *d;
  return std::numeric_limits<double>::quiet_NaN();
}

std::string as_text(const Cell& cell) {
  if (auto* i = std::get_if<int64_t>(&cell)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&cell)) return std::isfinite(*d) ? fmt::format("{}", *d) : std::string();
  if (auto* s = std::get_if<std::string>(&cell)) return *s;
  return "";
}

std::string array_name(const std::string& column) {
  std::string n = column;
  std::replace(n.begin(), n.end(), '/', '_');
  return n;
}

}  // namespace

void put_table(ResultGroup& group, const std::string& name, const Table& table) {
  if (name.empty() || name.find('/') != std::string::npos)
    throw Error(fmt::format("table name '{}' is empty or holds a '/'", name), "report.h5",
                "this is a bug in prism; please report it");
  const std::string columns_path = name + "/_columns";
  if (group.has(columns_path))
    throw Error(fmt::format("two tables named '{}'", name), "report.h5", "this is a bug in prism; please report it");
  const uint64_t n = table.rows.size();
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const std::string path = name + "/" + array_name(table.columns[c]);
    if (group.has(path))
      throw Error(fmt::format("table '{}' has two columns stored as '{}'", name, path), "report.h5",
                  "this is a bug in prism; please report it");
    switch (column_kind(table, c)) {
      case Kind::Integer: {
        std::vector<int64_t> v;
        for (const auto& row : table.rows) v.push_back(std::get<int64_t>(row[c]));
        group.set_integer(path, {n}, std::move(v));
        break;
      }
      case Kind::Real: {
        std::vector<double> v;
        for (const auto& row : table.rows) v.push_back(as_real(row[c]));
        group.set_real(path, {n}, std::move(v));
        break;
      }
      case Kind::Text: {
        std::vector<std::string> v;
        for (const auto& row : table.rows) v.push_back(as_text(row[c]));
        group.set_strings(path, {n}, std::move(v));
        break;
      }
    }
  }
  group.set_strings(columns_path, {uint64_t(table.columns.size())}, table.columns);
  group.set_strings(name + "/_notes", {uint64_t(table.notes.size())}, table.notes);
}

Table get_table(const ResultGroup& group, const std::string& name, const std::string& where) {
  Table t;
  t.columns = group.strings(name + "/_columns", where);
  if (group.has(name + "/_notes")) t.notes = group.strings(name + "/_notes", where);
  std::vector<const ResultArray*> arrays;
  for (const auto& c : t.columns) arrays.push_back(&group.at(name + "/" + array_name(c), where));
  const uint64_t rows = t.columns.empty() ? 0 : arrays.front()->size();
  for (uint64_t r = 0; r < rows; ++r) {
    std::vector<Cell> row;
    for (const ResultArray* a : arrays) {
      if (a->size() != rows)
        throw Error(fmt::format("table '{}' has columns of different lengths", name), where,
                    "rewrite the file with the prism that made it");
      if (a->type == ResultArray::Type::String) row.emplace_back(a->strings[r]);
      else if (a->type == ResultArray::Type::Float64) {
        if (std::isnan(a->real[r])) row.emplace_back(std::monostate{});
        else row.emplace_back(a->real[r]);
      } else if (a->type == ResultArray::Type::UInt64) row.emplace_back(int64_t(a->unsigned_integer[r]));
      else row.emplace_back(a->integer[r]);
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace prism
