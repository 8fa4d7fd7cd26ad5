// Inputs the fuzzers (fuzz/) found to break a data reader. Each is kept in
// fuzz/corpus/<harness>/ (the fuzzers start from it again) and replayed here:
// the reader must answer with one prism::Error naming the file and the fix.
#include <catch2/catch.hpp>

#include "memory_limit.h"
#include "prism/data/parquet_reader.h"
#include "prism/data/tokenizer_ranks.h"
#include "prism/error.h"
#include "support.h"

using namespace prism::test;

namespace {

// "error: <message>" when `load` throws prism::Error, else what happened.
template <class F>
std::string outcome(F&& load) {
  try {
    load();
    return "loaded";
  } catch (const prism::Error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

TEST_CASE("a vocabulary with one damaged, huge rank is refused without allocating for the ranks it skips", "[data][fuzz]") {
  // Found by prism_fuzz_tiktoken: "... 690000000" made the reader size its table by
  // the largest rank (22 GB of empty slots) before noticing the gap.
  const std::string path = source_path("fuzz/corpus/tiktoken/oom-rank-690000000.tiktoken");
  const std::string found = in_capped_child(size_t(1) << 30, [&] {
    return outcome([&] { prism::BpeRanks::load(path, "run data/get-vocab.sh"); });
  });
  INFO(found);
  CHECK_THAT(found, Catch::StartsWith("error: ") && Catch::Contains(path) && Catch::Contains("Fix:"));
  // The same fault alone: the error is the first missing rank.
  TempDir dir("prism-vocab");
  write_file(dir.file("huge.tiktoken"), "AA== 0\nAQ== 690000000\nAg== 1\n");
  const std::string alone = in_capped_child(size_t(1) << 30, [&] {
    return outcome([&] { prism::BpeRanks::load(dir.file("huge.tiktoken"), "run data/get-vocab.sh"); });
  });
  CHECK_THAT(alone, Catch::StartsWith("error: ") && Catch::Contains("rank 2 is missing (ranks must be 0..690000000"));
}

TEST_CASE("vocabulary rank errors still name the line of a duplicate and the first missing rank", "[data][fuzz]") {
  TempDir dir("prism-vocab");
  const std::string dup = dir.file("dup.tiktoken"), gap = dir.file("gap.tiktoken");
  write_file(dup, "AA== 0\nAQ== 1\nAg== 1\n");
  write_file(gap, "AA== 0\nAQ== 2\n");
  CHECK_THAT(outcome([&] { prism::BpeRanks::load(dup, "fix it"); }),
             Catch::Contains(dup + ":3") && Catch::Contains("rank 1 appears twice"));
  CHECK_THAT(outcome([&] { prism::BpeRanks::load(gap, "fix it"); }),
             Catch::Contains("rank 1 is missing (ranks must be 0..2 without gaps)"));
}

TEST_CASE("a Parquet row group whose data holds other than its footer's row count is refused, not shifted into the next group",
          "[data][fuzz][parquet]") {
  if (!prism::parquet_supported()) {
    WARN("SKIPPED: this prism was built without Arrow C++ (cmake/PrismFindArrow.cmake)");
    return;
  }
  // Found by prism_fuzz_parquet (CI's 20 s smoke): three row groups of 3 values each
  // whose footer entries announce 4, 1 and 4 rows (9 in all, as many as the data).
  // One Arrow reader over every group streamed all 9 values, so a read from the
  // start gave 9 rows without complaint, while skip_to(4) started at group 1's data
  // (the footer's row 4 is the data's row 3) and gave other rows than that read.
  const std::string input = read_file(source_path("fuzz/corpus/parquet/skip-to-row-group-count-mismatch.parquet"));
  REQUIRE(input.size() > 1);
  const std::string_view file = std::string_view(input).substr(1);  // the harness's first byte picks the column
  auto read_from = [&](uint64_t row) {
    return outcome([&] {
      prism::ParquetColumnReader reader(file, "mismatch.parquet", "text");
      CHECK(reader.rows() == 9);
      CHECK(reader.row_groups() == 3);
      if (row > 0) reader.skip_to(row);
      std::string_view value;
      bool null = false;
      while (reader.next(value, null)) {
      }
    });
  };
  // Each group is read as its own: group 0 holds 3 rows where its entry announces 4.
  CHECK_THAT(read_from(0), Catch::StartsWith("error: ") && Catch::Contains("mismatch.parquet") &&
                               Catch::Contains("row group 0: the footer announces 4 rows, the data holds 3") &&
                               Catch::Contains("Fix:"));
  // From group 1 (footer row 4): its one announced row reads, then group 2 is refused the same way.
  CHECK_THAT(read_from(4), Catch::StartsWith("error: ") &&
                               Catch::Contains("row group 2: the footer announces 4 rows, the data holds 3"));
}
