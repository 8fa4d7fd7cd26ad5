// prism export --tensorboard: event files written by the tensorboard package's
// writer, read back with tensorboard's own reader (test/reference/tensorboard_read.py,
// EventAccumulator) and held to run.h5 as h5py reads it.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

#include "analysis/analysis_support.h"
#include "prism/store/run_store.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_tensorboard(const std::string& dir) {
  auto r = run_reference("tensorboard_read.py", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.output);
}

// TensorBoard keeps scalars as float32.
void check_series(const json& got, const json& steps, const json& values) {
  REQUIRE(got.size() == values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK(got[i][0] == steps[i]);
    CHECK(got[i][1].get<double>() == Approx(values[i].get<double>()).epsilon(1e-6));
  }
}

// The run's scalars as run.h5 holds them, tag by tag.
void check_run(const json& tb, const json& h5, size_t layers) {
  const json& s = tb["scalars"];
  const json& d = h5["datasets"];
  check_series(s["train/loss"], d["train/step"], d["train/loss"]);
  check_series(s["train/lr"], d["train/step"], d["train/lr"]);
  check_series(s["train/grad_norm"], d["train/step"], d["train/grad_norm"]);
  check_series(s["val/loss"], d["val/step"], d["val/loss"]);
  check_series(s["val/loss_se"], d["val/step"], d["val/loss_se"]);
  for (size_t l = 0; l < layers; ++l) {  // D_l: /attention/distance's column l
    json col = json::array();
    for (const auto& row : d["attention/distance"]) col.push_back(row[l]);
    check_series(s[fmt::format("distance/layer_{:02d}", l)], d["attention/step"], col);
  }
  // tokens/s between consecutive logged rows, from tokens and time_s.
  const auto& tok = d["train/tokens"];
  const auto& t = d["train/time_s"];
  REQUIRE(s["train/tokens_per_s"].size() == tok.size() - 1);
  const double want = (tok[2].get<double>() - tok[1].get<double>()) / (t[2].get<double>() - t[1].get<double>());
  CHECK(s["train/tokens_per_s"][1][1].get<double>() == Approx(want).epsilon(1e-6));
}

}  // namespace

TEST_CASE("export --tensorboard: a sweep's runs read back by tensorboard equal run.h5, one HParams row each",
          "[export][tensorboard][cli]") {
  TwoRuns runs(8);
  const fs::path sweep = runs.dir.file("sweep");
  fs::create_directories(sweep / "s-prism");
  fs::create_directories(sweep / "s-uniform");
  fs::copy_file(runs.prism + "/run.h5", sweep / "s-prism/run.h5");
  fs::copy_file(runs.uniform + "/run.h5", sweep / "s-uniform/run.h5");
  write_file((sweep / "summary.csv").string(),
             "name,group,schedule,heads,seed,train.lr,status,rung,steps,tokens,best_val_loss,final_val_loss,wall_s,"
             "tokens_all_rungs,wall_s_all_rungs,run_dir,message\n"
             "s-prism,g,\"2,4\",\"[2, 4]\",0,0.003,completed,0,8,1024,10.6,10.6,2.5,1024,2.5,s-prism,\n"
             "s-uniform,g,uniform,\"[4, 4]\",0,0.003,completed,0,8,1024,10.6,10.6,2.5,1024,2.5,s-uniform,\n"
             "s-later,g,\"2,4\",\"[2, 4]\",1,0.003,pending,0,0,0,,,0,0,0,s-later,\n");
  const std::string tb = runs.dir.file("tb");
  auto r = run_prism(fmt::format("export {} --tensorboard {}", sweep.string(), tb));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("2 run(s) -> ") && Catch::Contains("tensorboard --logdir"));
  const json got = read_tensorboard(tb);
  REQUIRE(got.contains("s-prism"));
  REQUIRE(got.contains("s-uniform"));
  CHECK(!got.contains("s-later"));  // pending: no run.h5 yet
  check_run(got["s-prism"], read_run(runs.prism + "/run.h5"), 2);
  check_run(got["s-uniform"], read_run(runs.uniform + "/run.h5"), 2);
  // The schedule and config as text; one HParams row per trial, the grid's values included.
  const json& p = got["s-prism"];
  CHECK_THAT(p["texts"]["schedule"][0][1].get<std::string>(),
             Catch::Contains("heads per layer [2, 4], seed 0") && Catch::Contains("head width per layer: 32, 16"));
  CHECK_THAT(p["texts"]["config"][0][1].get<std::string>(), Catch::Contains("    schedule:"));
  CHECK(p["hparams"]["schedule"] == "2,4");
  CHECK(p["hparams"]["heads"] == "2,4");
  CHECK(p["hparams"]["seed"] == 0);
  CHECK(p["hparams"]["train.lr"] == "0.003");
  CHECK(got["s-uniform"]["hparams"]["schedule"] == "uniform");
  // The experiment, in DIR itself: the hparams and the metrics of the HParams table.
  const json& config = got["."]["hparams_config"];
  CHECK(config["hparams"] == json({"heads", "schedule", "seed", "train.lr"}));
  CHECK(config["metrics"] == json({"val/loss", "train/loss"}));
  // Nothing is written over an export without --force; with it, the runs are replaced, not appended to.
  auto again = run_prism(fmt::format("export {} --tensorboard {}", sweep.string(), tb));
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.output, Catch::Contains("already holds this run") && Catch::Contains("--force"));
  auto forced = run_prism(fmt::format("export {} --tensorboard {} --force", sweep.string(), tb));
  INFO(forced.output);
  REQUIRE(forced.exit_code == 0);
  const json back = read_tensorboard(tb);
  CHECK(back["s-prism"]["scalars"]["train/loss"].size() == got["s-prism"]["scalars"]["train/loss"].size());
  CHECK(back["."].contains("hparams_config"));
  for (const auto& e : fs::directory_iterator(tb)) CHECK(e.path().filename().string().rfind(".prism-", 0) != 0);
}

TEST_CASE("export --tensorboard --follow mirrors a run.h5 while it is written, and stops when it completes",
          "[export][tensorboard][cli]") {
  TempDir dir("prism-tensorboard-follow");
  const std::string run_dir = dir.file("live");
  fs::create_directories(run_dir);
  RunAttributes attrs{"model:\n  d_model: 64\nschedule:\n  heads: [2, 4]\n", {2, 4}, 3, "test"};
  RunStore store = RunStore::create(run_dir + "/run.h5", attrs);
  auto rows = [&](int from, int to) {
    for (int s = from; s <= to; ++s) {
      store.append_train({s, s * 100, 5.0 - 0.1 * s, 1e-3, 0.5 + s, 0.25 * s});
      if (s % 2 == 0) store.append_val({s, s * 100, 5.1 - 0.1 * s, 0.01});
      if (s % 3 == 0) store.append_attention(s, {{1.0 * s, 2.0}, {3.0, 4.0, 5.0, 6.0}});
    }
  };
  rows(1, 3);
  const std::string tb = dir.file("tb");
  Process follow{-1, ""};
  std::thread mirror([&] {
    follow = run(fmt::format("timeout 120 '{}' export {} --tensorboard {} --follow --poll 0.2", PRISM_BINARY, run_dir, tb));
  });
  // The first rows reach the event files while the run is still "running".
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  json early;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (!fs::is_directory(tb + "/live")) continue;
    early = read_tensorboard(tb);
    if (early.contains("live") && early["live"]["scalars"].contains("train/loss") &&
        early["live"]["scalars"]["train/loss"].size() == 3)
      break;
  }
  rows(4, 7);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  store.set_status("completed");
  store.close();
  mirror.join();
  INFO(follow.output);
  REQUIRE(follow.exit_code == 0);
  REQUIRE(early.contains("live"));
  CHECK(early["live"]["scalars"]["train/loss"].size() == 3);  // all that had been written by then
  const json got = read_tensorboard(tb);
  check_run(got["live"], read_run(run_dir + "/run.h5"), 2);
  CHECK(got["live"]["scalars"]["distance/layer_00"][1][1] == Approx(6.0 * 0.5 + 2.0 * 0.5));  // mean of heads at step 6
  CHECK(got["live"]["hparams"]["seed"] == 3);
}
