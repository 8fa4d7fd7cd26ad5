// Every config and sweep file shipped in experiments/ composes, and its
// schedules follow all six rules: the first files a user runs must not teach
// them to ignore warnings.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "prism/config/config.h"
#include "prism/search/search_plan.h"
#include "prism/sweep/plan.h"
#include "support.h"

using namespace prism;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> yaml_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(prism::test::source_path(folder)))
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string describe(const std::vector<RuleFinding>& findings) {
  std::string s;
  for (const auto& f : findings) s += f.describe() + "; ";
  return s;
}

}  // namespace

TEST_CASE("shipped configs compose and their schedules follow every guideline", "[config][shipped]") {
  const auto files = yaml_files("experiments");
  REQUIRE(files.size() >= 2);
  for (const auto& file : files) {
    INFO(file);
    const Config c = load_config(file);
    CHECK(describe(c.schedule_warnings).empty());
  }
}

TEST_CASE("shipped sweep files plan, and every trial's schedule follows every guideline", "[config][shipped][sweep]") {
  std::vector<std::string> files = yaml_files("experiments/sweeps");
  for (const auto& f : yaml_files("experiments/study")) files.push_back(f);
  REQUIRE(files.size() >= 4);
  for (const auto& file : files) {
    const SweepPlan plan = plan_sweep(file, {});
    CHECK(!plan.trials.empty());
    for (const auto& t : plan.trials) {
      INFO(file << ": trial " << t.name);
      const Config c = parse_config(YAML::Load(t.config), t.name);
      CHECK(describe(c.schedule_warnings).empty());
    }
  }
}

TEST_CASE("CPU study, sweep and search files never force bf16: it is emulated, 14x slower, on AVX2-only CPUs",
          "[config][shipped][sweep]") {
  // train.dtype auto measures the faster dtype here (train/cpu_dtype_probe.h); bf16 named in a
  // CPU file made README's main job take 75 minutes instead of 3 on an AVX2 EPYC. GPU files
  // (train.device: cuda) name bf16, which every GPU they target runs natively.
  std::vector<std::string> files = yaml_files("experiments/study");
  for (const char* folder : {"experiments/sweeps", "experiments/search/ground-truth"})
    for (const auto& f : yaml_files(folder)) files.push_back(f);
  REQUIRE(files.size() >= 12);
  int cpu_trials = 0;
  for (const auto& file : files) {
    const SweepPlan plan = plan_sweep(file, {});
    for (const auto& t : plan.trials) {
      INFO(file << ": trial " << t.name);
      const Config c = parse_config(YAML::Load(t.config), t.name);
      if (c.train.device.rfind("cuda", 0) == 0) continue;
      ++cpu_trials;
      CHECK(c.train.dtype != "bf16");
    }
  }
  CHECK(cpu_trials > 100);
  // The search files (their trials are the search's own run).
  for (const auto& file : yaml_files("experiments/search")) {
    INFO(file);
    const TrainConfig t = plan_search(file).config.train;
    if (t.device.rfind("cuda", 0) != 0) CHECK(t.dtype != "bf16");
  }
}
