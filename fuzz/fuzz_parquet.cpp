// The Parquet reader's wrapper (ParquetColumnReader, parquet_reader.h) on
// arbitrary file contents, read from memory: the `text` column of the input, or
// (first byte odd) the `body` column. Arrow parses the file; the harness checks
// what the wrapper makes of it: every failure is a prism::Error naming the file
// and the fix, rows come numbered 0, 1, 2, ... up to the footer's row count, a
// null row has no text, and a reader skipped to a row gives the same rows from
// there (whole row groups skipped unread).
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "prism/data/parquet_reader.h"

namespace {

struct Row {
  bool null;
  std::string value;
};

std::vector<Row> read_from(std::string_view file, const std::string& column, uint64_t skip_to, uint64_t& rows) {
  prism::ParquetColumnReader reader(file, "input.parquet", column);
  rows = reader.rows();
  if (skip_to > 0) reader.skip_to(skip_to);
  std::vector<Row> out;
  std::string_view value;
  bool null = false;
  for (uint64_t expected = skip_to; reader.row() == expected && reader.next(value, null); ++expected) {
    if (null && !value.empty()) prism::fuzz::finding("a null row with a value");
    out.push_back({null, std::string(value)});
    if (out.size() > (uint64_t(1) << 22)) prism::fuzz::finding("more than 4M rows from a fuzz input");
  }
  if (reader.row() != skip_to + out.size()) prism::fuzz::finding("row() does not count the rows read");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!prism::parquet_supported() || size < 1) return 0;
  const std::string column = (data[0] & 1) ? "body" : "text";
  const std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  prism::fuzz::expect_clean([&] {
    uint64_t rows = 0;
    const std::vector<Row> all = read_from(file, column, 0, rows);
    if (all.size() != rows) prism::fuzz::finding("the rows read differ from the footer's row count without an error");
    if (all.size() >= 2) {
      const uint64_t from = all.size() / 2;
      uint64_t again = 0;
      const std::vector<Row> tail = read_from(file, column, from, again);
      if (tail.size() != all.size() - from) prism::fuzz::finding("skip_to gives another number of rows");
      for (size_t k = 0; k < tail.size(); ++k)
        if (tail[k].null != all[from + k].null || tail[k].value != all[from + k].value)
          prism::fuzz::finding("skip_to gives other rows");
    }
  });
  return 0;
}
