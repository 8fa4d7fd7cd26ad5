#include "prism/store/table.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "prism/error.h"

namespace prism {

void Table::add(std::vector<Cell> row) {
  if (row.size() != columns.size())
    throw Error(fmt::format("table row of {} cells for {} columns", row.size(), columns.size()), "export",
                "this is a bug in prism; please report it");
  rows.push_back(std::move(row));
}

size_t Table::column(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw Error(fmt::format("no column '{}'", name), "export table", "use one of the table's columns");
}

namespace {

std::string csv_field(const Cell& c) {
  if (auto* i = std::get_if<int64_t>(&c)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&c)) return std::isfinite(*d) ? fmt::format("{}", *d) : std::string();
  if (auto* s = std::get_if<std::string>(&c)) {
    if (s->find_first_of(",\"\n\r") == std::string::npos) return *s;
    std::string q = "\"";
    for (char ch : *s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  }
  return "";
}

}  // namespace

std::string to_csv(const Table& t) {
  std::string out;
  for (size_t i = 0; i < t.columns.size(); ++i) out += (i ? "," : "") + csv_field(Cell{t.columns[i]});
  out += "\n";
  for (const auto& row : t.rows) {
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
    out += "\n";
  }
  return out;
}

std::string to_json(const Table& t) {
  // ordered_json keeps the columns in table order.
  using json = nlohmann::ordered_json;
  json records = json::array();
  for (const auto& row : t.rows) {
    json r = json::object();
    for (size_t i = 0; i < row.size(); ++i) {
      const Cell& c = row[i];
      if (auto* v = std::get_if<int64_t>(&c)) r[t.columns[i]] = *v;
      else if (auto* d = std::get_if<double>(&c)) r[t.columns[i]] = std::isfinite(*d) ? json(*d) : json();
      else if (auto* s = std::get_if<std::string>(&c)) r[t.columns[i]] = *s;
      else r[t.columns[i]] = nullptr;
    }
    records.push_back(std::move(r));
  }
  return records.dump(1) + "\n";
}

CsvFile read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the file", path, "check the path");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      record.push_back(field), field.clear(), any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) record.push_back(field), records.push_back(record);
      record.clear(), field.clear(), any = false;
    } else {
      field += c, any = true;
    }
  }
  if (quoted) throw Error("unterminated quoted field", path, "check the CSV file (a missing closing quote)");
  if (any || !field.empty()) record.push_back(field), records.push_back(record);
  CsvFile csv;
  if (records.empty()) return csv;
  csv.header = records.front();
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != csv.header.size())
      throw Error(fmt::format("line {} has {} fields, the header {}", r + 1, records[r].size(), csv.header.size()),
                  path, "check the CSV file");
    csv.rows.push_back(records[r]);
  }
  return csv;
}

}  // namespace prism
