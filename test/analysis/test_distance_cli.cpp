// prism distance on two trained runs: the stored profiles against a PyTorch
// recomputation from explicit attention probabilities, Delta D_l, bad inputs.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "analysis/analysis_support.h"

using namespace prism::test;

TEST_CASE("prism distance: profiles match PyTorch, Delta D_l is their difference", "[analysis][distance][cli]") {
  TwoRuns runs;
  auto r = run_prism(fmt::format("distance {} --baseline {} --data {} --tokens 2048 --batch 4 --bins 4 --threads 1",
                                 runs.prism, runs.uniform, runs.shards));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("D_l on 2048 held-out tokens (16 batches of 4 x 32)"));
  CHECK_THAT(r.output, Catch::Contains("Delta D_l = D_l(Prism) - D_l(baseline)"));
  CHECK_THAT(r.output, Catch::Contains("1 Prism run(s) vs 1 baseline run(s), 16 batches"));
  CHECK_THAT(r.output, Catch::Contains("/attention/delta"));

  for (const auto& run : {runs.prism, runs.uniform}) {
    auto ref = run_reference("distance_reference.py",
                             fmt::format("{}/checkpoints/step_000012/model.safetensors {} {}/run.h5", run,
                                         runs.val_shard(), run));
    INFO(ref.output);
    REQUIRE(ref.exit_code == 0);
    auto j = nlohmann::json::parse(ref.output);
    CHECK(j["batches"] == 16);
    CHECK(j["bins"] == 4);
    for (const char* k : {"max_diff_batch", "max_diff_position", "max_diff_head", "max_diff_layer",
                          "max_diff_layer_by_position", "max_diff_normalized_batch", "max_diff_normalized_layer"}) {
      INFO(k);
      CHECK(j[k].get<double>() < 1e-5);
    }
  }
  auto p = read_run(runs.prism + "/run.h5")["datasets"];
  auto u = read_run(runs.uniform + "/run.h5")["datasets"];
  auto dp = p["attention/heldout/distance"].get<std::vector<double>>();
  auto du = u["attention/heldout/distance"].get<std::vector<double>>();
  auto delta = p["attention/delta/delta"].get<std::vector<double>>();
  REQUIRE(delta.size() == 2);
  for (size_t l = 0; l < 2; ++l) CHECK(delta[l] == Approx(dp[l] - du[l]).margin(1e-12));
  auto lo = p["attention/delta/batch_ci_lo"].get<std::vector<double>>();
  auto hi = p["attention/delta/batch_ci_hi"].get<std::vector<double>>();
  for (size_t l = 0; l < 2; ++l) {
    CHECK(lo[l] <= delta[l]);
    CHECK(hi[l] >= delta[l]);
  }
  CHECK(p["attention/delta/heads"].get<std::vector<int>>() == std::vector<int>{2, 4});
  CHECK(p["attention/delta/baseline_heads"].get<std::vector<int>>() == std::vector<int>{4, 4});
  CHECK(u.count("attention/delta/delta") == 0);  // the baseline's own file gets no delta
  // Training-time rows are untouched.
  CHECK(p["attention/step"].get<std::vector<int64_t>>() == std::vector<int64_t>{0, 4, 8, 12});
}

TEST_CASE("prism distance: bad inputs are clear errors", "[analysis][distance][cli]") {
  TwoRuns runs(4);
  // A result file of another schedule.
  auto r = run_prism(fmt::format("distance {} --data {} --tokens 512 --out {}/run.h5", runs.prism, runs.shards,
                                 runs.uniform));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("schedule is [4,4], the checkpoint's [2,4]") && Catch::Contains("--out"));
  CHECK_THAT(r.output, !Catch::Contains("D_l on"));  // refused before measuring anything
  // No held-out data there.
  r = run_prism(fmt::format("distance {} --data {}/nothing", runs.prism, runs.dir.path()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("nothing"));
  // A window longer than the model's context.
  r = run_prism(fmt::format("distance {} --data {} --seq-len 64", runs.prism, runs.shards));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("context is 32"));
  // Runs never measured on held-out tokens have no profile to export and no delta.
  r = run_prism(fmt::format("export {} --what position", runs.prism));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("has a held-out distance profile") && Catch::Contains("prism distance"));
  r = run_prism(fmt::format("export {} --what delta", runs.prism));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("no Delta D_l stored") && Catch::Contains("--baseline"));
  // A checkpoint outside a run directory needs --out, which makes a result file of its own.
  std::filesystem::copy_file(runs.prism + "/checkpoints/step_000004/model.safetensors", runs.dir.file("model.safetensors"));
  r = run_prism(fmt::format("distance {} --data {} --tokens 512", runs.dir.file("model.safetensors"), runs.shards));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("not inside a run directory") && Catch::Contains("--out FILE.h5"));
  r = run_prism(fmt::format("distance {} --data {} --tokens 512 --out {}", runs.dir.file("model.safetensors"),
                            runs.shards, runs.dir.file("alone.h5")));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  auto alone = read_run(runs.dir.file("alone.h5"));
  CHECK(alone["attrs"]["heads"] == std::vector<int>{2, 4});
  CHECK(alone["datasets"]["attention/heldout/distance"].size() == 2);
}
