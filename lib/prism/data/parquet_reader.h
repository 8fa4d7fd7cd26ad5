#pragma once
// One string column of a Parquet file, read in order, a batch of rows at a time
// (memory: one batch and Arrow's page buffers, whatever the file's size), through
// Arrow C++ (parquet::arrow). This header is the whole interface: plain C++17 and
// std types, no Arrow. Arrow's headers need C++20 and come from wherever Arrow was
// found (the pyarrow wheel here), so parquet_reader.cpp alone includes them, in its
// own C++20 object library (cmake/PrismFindArrow.cmake). In a prism built without
// Arrow the constructor throws, naming the fix.
//
// Errors are InputError naming the file (and the row where there is one): not a
// Parquet file, a damaged footer or page, no such column (the columns present are
// listed), a column that is not of strings.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace prism {

// Whether this prism reads Parquet (built with Arrow C++).
bool parquet_supported();

class ParquetColumnReader {
 public:
  // The file at `path`, column `column`.
  ParquetColumnReader(const std::string& path, const std::string& column);
  // A file held in memory (`bytes` must outlive the reader); `name` names it in errors.
  ParquetColumnReader(std::string_view bytes, const std::string& name, const std::string& column);
  ~ParquetColumnReader();
  ParquetColumnReader(const ParquetColumnReader&) = delete;
  ParquetColumnReader& operator=(const ParquetColumnReader&) = delete;

  // The next row's value (valid until the next call); `null` is set for a null
  // value (value then empty). False after the last row.
  bool next(std::string_view& value, bool& null);
  // The row next() returns next (0-based).
  uint64_t row() const;
  // Moves forward to `row` (resume): whole row groups are skipped unread.
  void skip_to(uint64_t row);

  uint64_t rows() const;        // in the file, from its footer
  int row_groups() const;
  uint64_t file_size() const;   // bytes
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism
