// scripts/plot/*.py render from two small real runs: every plot exists and is a
// real picture (size, dimensions, many colours), PNG by default, PDF on request.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "analysis/analysis_support.h"

using namespace prism::test;

namespace {

Process plot(const std::string& script, const std::string& args) {
  return run(fmt::format("'{}' '{}/scripts/plot/{}' {}", PRISM_PYTHON, PRISM_SOURCE_DIR, script, args));
}

}  // namespace

TEST_CASE("plots: loss, Delta D_l, heatmaps, position profile, loss by position and schedule diagram render",
          "[analysis][plots]") {
  TwoRuns runs;
  auto m = run_prism(fmt::format("distance {} --baseline {} --data {} --tokens 1024 --batch 4 --bins 4 --threads 1",
                                 runs.prism, runs.uniform, runs.shards));
  INFO(m.output);
  REQUIRE(m.exit_code == 0);
  const std::string out = runs.dir.file("plots");
  REQUIRE(run("mkdir -p " + out).exit_code == 0);
  const std::vector<std::pair<std::string, std::string>> plots = {
      {"loss.py", fmt::format("{} {} --out {}/loss.png", runs.prism, runs.uniform, out)},
      {"delta.py", fmt::format("{} --out {}/delta.png", runs.prism, out)},
      {"heatmap.py", fmt::format("{} --out {}/heatmap.png", runs.prism, out)},
      {"heatmap.py", fmt::format("{} --source train --out {}/heatmap_train.png", runs.uniform, out)},
      {"position.py", fmt::format("{} {} --out {}/position.png", runs.prism, runs.uniform, out)},
      // The loss by position each run stored at the end of training (/val/by_position/T32).
      {"position_loss.py", fmt::format("{} {} --out {}/position_loss.png", runs.prism, runs.uniform, out)},
      {"schedule.py", fmt::format("{} {} --heads 3x3,6x3,12x6 --d-model 768 --out {}/schedule.png", runs.prism,
                                  runs.uniform, out)},
      {"schedule.py", fmt::format("--heads 3x3,6x3,12x6 --d-model 768 --format pdf --out {}/schedule.pdf", out)},
  };
  std::string files;
  for (const auto& [script, args] : plots) {
    auto r = plot(script, args);
    INFO(script << " " << args << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
  }
  auto r = run_reference("check_image.py", fmt::format("{0}/loss.png {0}/delta.png {0}/heatmap.png {0}/heatmap_train.png "
                                                       "{0}/position.png {0}/position_loss.png {0}/schedule.png {0}/schedule.pdf",
                                                       out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto images = nlohmann::json::parse(r.output);
  REQUIRE(images.size() == 8);
  for (const auto& img : images) {
    INFO(img.dump());
    if (img["path"].get<std::string>().size() > 4 &&
        img["path"].get<std::string>().substr(img["path"].get<std::string>().size() - 4) == ".pdf") {
      CHECK(img["format"] == "pdf");
      CHECK(img["bytes"].get<int>() > 5000);
      continue;
    }
    CHECK(img["format"] == "png");
    CHECK(img["bytes"].get<int>() > 15000);
    CHECK(img["width"].get<int>() >= 400);
    CHECK(img["height"].get<int>() >= 250);
    CHECK(img["colours"].get<int>() > 50);  // lines, text, fills: not a blank or single-colour canvas
    CHECK(img["std"].get<double>() > 0.02);
  }
  // A run without the needed data says what to run.
  auto bad = plot("delta.py", fmt::format("{} --out {}/x.png", runs.uniform, out));
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.output, Catch::Contains("no /attention/delta") && Catch::Contains("prism distance"));
  auto other = plot("position_loss.py", fmt::format("{} --context 999 --out {}/y.png", runs.prism, out));
  CHECK(other.exit_code != 0);
  CHECK_THAT(other.output, Catch::Contains("prism eval RUN --position-loss --context 999"));
}
