// One way to read a config: every command that takes a config file composes it as
// `prism train` does (defaults lists, group=option and key=value overrides,
// interpolation, the data's vocabulary), so each prints the same resolved config.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "support.h"

namespace fs = std::filesystem;
using prism::test::Process;

namespace {

// `prism <args>` from the repository root, where the shipped configs' relative paths
// (data.dir, experiments/ groups) point, as README runs them.
Process prism_at_root(const std::string& args) {
  return prism::test::run(fmt::format("cd '{}' && '{}' {}", PRISM_SOURCE_DIR, PRISM_BINARY, args));
}

std::vector<std::string> shipped(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(PRISM_SOURCE_DIR) / folder))
    if (e.path().extension() == ".yaml") out.push_back(folder + "/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The resolved config a command printed with --print-config (a sweep also prints its
// `sweep:` section after it, which other commands do not have).
std::string base_config(const Process& p) {
  const auto at = p.output.find("\nsweep:");
  return at == std::string::npos ? p.output : p.output.substr(0, at + 1);
}

}  // namespace

TEST_CASE("every shipped config resolves the same through train, schedule check/enumerate/inspect", "[config][cli]") {
  const auto files = shipped("experiments");
  REQUIRE(files.size() >= 2);
  for (const auto& f : files) {
    INFO(f);
    const Process train = prism_at_root(fmt::format("train {} --print-config", f));
    INFO(train.output);
    REQUIRE(train.exit_code == 0);
    CHECK_THAT(train.output, Catch::Contains("vocab_size:"));
    for (const char* action : {"check", "enumerate", "inspect"}) {
      const Process other = prism_at_root(fmt::format("schedule {} --config {} --print-config", action, f));
      INFO("schedule " << action);
      CHECK(other.exit_code == 0);
      CHECK(other.output == train.output);
    }
    // And the commands themselves run on it (inspect once refused `defaults:` files).
    const Process inspect = prism_at_root(fmt::format("schedule inspect --config {}", f));
    INFO(inspect.output);
    CHECK(inspect.exit_code == 0);
  }
}

TEST_CASE("every shipped sweep and study file: its base config is the same in sweep and schedule", "[config][cli]") {
  std::vector<std::string> files = shipped("experiments/study");
  for (const auto& f : shipped("experiments/sweeps")) files.push_back(f);
  REQUIRE(files.size() >= 8);
  for (const auto& f : files) {
    INFO(f);
    const Process sweep = prism_at_root(fmt::format("sweep {} --print-config", f));
    INFO(sweep.output);
    REQUIRE(sweep.exit_code == 0);
    CHECK_THAT(sweep.output, Catch::Contains("\nsweep:"));
    for (const char* action : {"check", "inspect"}) {
      const Process schedule = prism_at_root(fmt::format("schedule {} --config {} --print-config", action, f));
      INFO("schedule " << action << ": " << schedule.output);
      CHECK(schedule.exit_code == 0);
      CHECK(schedule.output == base_config(sweep));
    }
    const Process inspect = prism_at_root(fmt::format("schedule inspect --config {}", f));
    INFO(inspect.output);
    CHECK(inspect.exit_code == 0);
    // train refuses a sweep file and names the command that runs it.
    const Process train = prism_at_root(fmt::format("train {} --print-config", f));
    CHECK(train.exit_code == 2);
    CHECK_THAT(train.output, Catch::Contains("sweep file") && Catch::Contains("prism sweep " + f));
  }
}

TEST_CASE("schedule composes defaults and group overrides as train does", "[config][cli]") {
  // The defaults list chooses model: cpu-128 (6 layers); the schedule command once fell
  // back to the 12-layer preset and refused the 6-layer schedule.
  const Process six = prism_at_root("schedule inspect --config experiments/cpu-prism.yaml");
  INFO(six.output);
  CHECK(six.exit_code == 0);
  CHECK_THAT(six.output, Catch::Contains("cpu-128: 6 layers x 128"));
  // model=cpu-192 (6 baseline heads, so with the uniform schedule) replaces the group's
  // choice in both commands alike.
  const Process train = prism_at_root("train experiments/cpu-prism.yaml model=cpu-192 schedule=uniform --print-config");
  const Process inspect = prism_at_root("schedule inspect --config experiments/cpu-prism.yaml model=cpu-192 schedule=uniform --print-config");
  CHECK(train.exit_code == 0);
  CHECK(inspect.output == train.output);
  CHECK_THAT(train.output, Catch::Contains("d_model: 192"));
  // schedule=uniform trains the baseline: the example's schedule is a group choice, not
  // keys of the file, which would win over any choice.
  const Process prism = prism_at_root("train experiments/cpu-prism.yaml --print-config");
  const Process uniform = prism_at_root("train experiments/cpu-prism.yaml schedule=uniform --print-config");
  CHECK_THAT(prism.output, Catch::Contains("heads: [1, 1, 4, 4, 4, 4]"));
  CHECK_THAT(uniform.output, Catch::Contains("heads: [4, 4, 4, 4, 4, 4]"));
  // Without a file, a group choice adds its group (experiments/model/cpu-128.yaml).
  const Process bare = prism_at_root("schedule inspect model=cpu-128 --heads 1,1,4,4,4,4");
  INFO(bare.output);
  CHECK(bare.exit_code == 0);
  CHECK_THAT(bare.output, Catch::Contains("cpu-128: 6 layers x 128"));
  // A group that does not exist is named, with the groups that do.
  const Process bad = prism_at_root("schedule inspect --config experiments/cpu-prism.yaml model=cpu-999");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("no option 'cpu-999'") && Catch::Contains("cpu-128"));
}
