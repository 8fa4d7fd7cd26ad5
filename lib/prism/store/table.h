#pragma once
// Table: a tidy table (one row per observation, named columns) and its CSV and
// JSON forms, which pandas (read_csv / read_json), R and spreadsheets read as is.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace prism {

// Empty (monostate) and NaN cells are written as an empty CSV field / JSON null.
using Cell = std::variant<std::monostate, int64_t, double, std::string>;

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> notes;  // what was left out and why, for the user

  void add(std::vector<Cell> row);  // throws if the width is wrong
  size_t column(const std::string& name) const;  // index; throws prism::Error if absent
};

// RFC 4180: header line, comma-separated, fields quoted when they hold , " or a newline.
std::string to_csv(const Table& t);
// An array of records: [{"column": value, ...}, ...].
std::string to_json(const Table& t);

// Reads a CSV file (RFC 4180 quoting) as a header and rows of strings.
struct CsvFile {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
CsvFile read_csv(const std::string& path);

}  // namespace prism
