// A full disk while `prism data prepare` writes its shards (issue 17): the
// shard write that meets it fails with one clear error naming the shard and
// the fix; a corpus prepared there before keeps its shards and prepare.json
// byte for byte, nothing half-written is left; once space is freed the rerun
// writes exactly the shards a preparation elsewhere writes. The disk is a real
// small tmpfs (disk_support.h).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "data_support.h"
#include "disk_support.h"
#include "support.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

// Every file under `dir` (relative name -> bytes), hidden ones included.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_file(e.path().string());
  return files;
}

}  // namespace

TEST_CASE("a full disk while preparing shards: a clear error, the previous corpus intact, a rerun writes the same shards",
          "[data][full-disk]") {
  SmallDisk disk(size_t(8) << 20);
  if (!disk.mounted()) {
    WARN("SKIPPED: " << disk.why_not());
    return;
  }
  TempDir work("prism-prepare-disk");
  // Some real text: a few of the Austen files (a few hundred kB of shards).
  const std::string text = work.file("text");
  fs::create_directories(text);
  int copied = 0;
  for (const auto& e : fs::directory_iterator(austen_text_dir()))
    if (e.path().extension() == ".txt" && copied < 12 && e.path().filename().string().rfind("emma_", 0) == 0) {
      fs::copy_file(e.path(), text + "/" + e.path().filename().string());
      ++copied;
    }
  REQUIRE(copied == 12);
  const std::string vocab = " --vocab '" + vocab_path() + "' -q --threads 2";
  auto prepare = [&](const std::string& out, const std::string& more) {
    return run_prism(fmt::format("data prepare '{}' -o '{}' --name corpus --val-tokens 4000 {}{}", text, out, more, vocab));
  };
  // What a preparation on a disk with space writes.
  auto ref = prepare(work.file("reference"), "--shard-tokens 20000");
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  const auto expected = snapshot(work.file("reference"));
  REQUIRE(expected.size() > 4);  // prepare.json, the val shard and several train shards

  const std::string out = disk.file("corpus");
  SECTION("a fresh preparation") {
    disk.fill(64 << 10);  // room for the first shards, not for all
    auto r = prepare(out, "--shard-tokens 20000");
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains("corpus_") && Catch::Contains(".bin") &&
                             Catch::Contains("No space left on device") && Catch::Contains("Fix:"));
    // Nothing under the final names, nothing half-written left behind.
    CHECK(snapshot(out).empty());
    disk.free_space();
    auto again = prepare(out, "--shard-tokens 20000");  // no --force needed: nothing was prepared
    INFO(again.output);
    REQUIRE(again.exit_code == 0);
  }
  SECTION("redoing a prepared corpus with --force") {
    auto first = prepare(out, "--shard-tokens 50000");
    INFO(first.output);
    REQUIRE(first.exit_code == 0);
    const auto before = snapshot(out);
    disk.fill();
    auto r = prepare(out, "--shard-tokens 20000 --force");
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains("No space left on device") && Catch::Contains("Fix:"));
    CHECK(snapshot(out) == before);  // the old shards and prepare.json, byte for byte, and nothing else
    disk.free_space();
    auto again = prepare(out, "--shard-tokens 20000 --force");
    INFO(again.output);
    REQUIRE(again.exit_code == 0);
  }
  // The shards equal the reference's byte for byte; prepare.json differs only in its timing.
  auto got = snapshot(out);
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, bytes] : expected) {
    INFO(name);
    REQUIRE(got.count(name));
    if (name != "prepare.json") CHECK(got[name] == bytes);
  }
}
