// Inputs the fuzzers (fuzz/) found to break a data reader. Each is kept in
// fuzz/corpus/<harness>/ (the fuzzers start from it again) and replayed here:
// the reader must answer with one prism::Error naming the file and the fix.
#include <catch2/catch.hpp>

#include "memory_limit.h"
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
