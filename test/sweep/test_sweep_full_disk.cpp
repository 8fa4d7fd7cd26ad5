// A full disk while the sweep index is written (issue 17): summary.csv and
// sweep.h5 are replaced through temporary files, so a write that fails for want
// of space says so, names the file, leaves the previous index as it was and no
// temporary file behind; once there is space, a rerun of the sweep completes the
// index exactly as before. The disk is a real small tmpfs (disk_support.h).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "disk_support.h"
#include "support.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_index(const std::string& h5) {
  auto r = run_reference("read_sweep.py", h5);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

// The files a failed index write must leave as they were.
struct IndexFiles {
  std::string summary, ranking, h5;
  explicit IndexFiles(const std::string& dir)
      : summary(read_file(dir + "/summary.csv")), ranking(read_file(dir + "/ranking.txt")), h5(read_file(dir + "/sweep.h5")) {}
  bool operator==(const IndexFiles& o) const { return summary == o.summary && ranking == o.ranking && h5 == o.h5; }
};

std::vector<std::string> temporary_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) out.push_back(e.path().string());
  return out;
}

}  // namespace

TEST_CASE("a full disk while writing the sweep index: a clear error, the old index intact, a rerun completes it",
          "[sweep][full-disk]") {
  SmallDisk disk(size_t(16) << 20);
  if (!disk.mounted()) {
    WARN("SKIPPED: " << disk.why_not());
    return;
  }
  TempDir work("prism-sweep-disk");
  // Small checkpoints (vocabulary 512): two trials fit the disk many times over.
  auto shards = run_reference("make_shards.py", work.file("shards") + " --vocab 512 --train-tokens 8000 --val-tokens 2000");
  REQUIRE(shards.exit_code == 0);
  const std::string grid = work.file("grid.yaml");
  write_file(grid, fmt::format(
                       "model: {{preset: test-tiny, vocab_size: 512}}\n"
                       "schedule: {{heads: [4, 4]}}\n"
                       "train: {{batch_size: 2, seq_len: 16, max_steps: 4, eval_every: 2, eval_tokens: 64, distance_every: 0,\n"
                       "        distance_batch: 1, checkpoint_every: 2, log_every: 1, dtype: fp32}}\n"
                       "data: {{dir: {}}}\n"
                       "sweep:\n  grid:\n    schedule.heads: [[2, 4]]\n",
                       work.file("shards")));
  const std::string out = disk.file("sweep");
  auto first = run_prism(fmt::format("sweep {} --out {}", grid, out));
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const IndexFiles before(out);
  const auto index_before = read_index(out + "/sweep.h5");

  SECTION("no space at all: summary.csv, the first file written, fails") {
    disk.fill();
    auto r = run_prism(fmt::format("sweep {} --collect", out));
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains("summary.csv") && Catch::Contains("No space left on device") &&
                             Catch::Contains("Fix:"));
  }
  SECTION("room for the text files but not for sweep.h5") {
    disk.fill(8 << 10);
    auto r = run_prism(fmt::format("sweep {} --collect", out));
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains("sweep.h5") && Catch::Contains("No space left on device") &&
                             Catch::Contains("Fix:"));
  }
  CHECK(IndexFiles(out) == before);   // the previous index, byte for byte
  CHECK(temporary_files(out).empty());  // and nothing half-written beside it
  CHECK(read_index(out + "/sweep.h5") == index_before);

  disk.free_space();
  auto rerun = run_prism(fmt::format("sweep {} --out {}", grid, out));
  INFO(rerun.output);
  REQUIRE(rerun.exit_code == 0);
  CHECK_THAT(rerun.output, Catch::Contains("(completed)"));
  CHECK(read_file(out + "/summary.csv") == before.summary);
  CHECK(read_file(out + "/ranking.txt") == before.ranking);
  CHECK(read_index(out + "/sweep.h5") == index_before);
}
