// prism export: tidy CSV / JSON tables from runs, run directories and sweeps,
// checked against the run files as h5py reads them.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "analysis/analysis_support.h"
#include "prism/error.h"
#include "prism/store/table.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

TEST_CASE("export tables: CSV quoting, empty NaN cells, JSON records in column order", "[analysis][export]") {
  Table t;
  t.columns = {"run", "heads", "loss", "n"};
  t.add({std::string("a"), std::string("2,4"), 1.5, int64_t(3)});
  t.add({std::string("say \"hi\"\nthere"), std::string("4"), std::numeric_limits<double>::quiet_NaN(), Cell{}});
  CHECK(to_csv(t) == "run,heads,loss,n\na,\"2,4\",1.5,3\n\"say \"\"hi\"\"\nthere\",4,,\n");
  auto j = nlohmann::ordered_json::parse(to_json(t));
  REQUIRE(j.size() == 2);
  CHECK(j[0]["heads"] == "2,4");
  CHECK(j[0]["n"] == 3);
  CHECK(j[1]["loss"].is_null());
  CHECK(j[1]["n"].is_null());
  CHECK(j[0].begin().key() == "run");  // columns keep their order
  TempDir dir("prism-export");
  write_file(dir.file("t.csv"), to_csv(t));
  CsvFile back = read_csv(dir.file("t.csv"));
  CHECK(back.header == t.columns);
  REQUIRE(back.rows.size() == 2);
  CHECK(back.rows[1][0] == "say \"hi\"\nthere");
  CHECK(back.rows[0][1] == "2,4");
  CHECK_THROWS_AS(t.add({std::string("short")}), Error);
}

namespace {

CsvFile export_csv(const std::string& args, const TempDir& dir) {
  const std::string out = dir.file("export.csv");
  auto r = run_prism(fmt::format("export {} --out {}", args, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return read_csv(out);
}

size_t col(const CsvFile& csv, const std::string& name) {
  auto it = std::find(csv.header.begin(), csv.header.end(), name);
  REQUIRE(it != csv.header.end());
  return static_cast<size_t>(it - csv.header.begin());
}

}  // namespace

TEST_CASE("prism export: loss, val, distance, position, loss by position, delta, eval and summary of runs and sweeps", "[analysis][export][cli]") {
  TwoRuns runs;
  auto m = run_prism(fmt::format("distance {} --baseline {} --data {} --tokens 1024 --batch 4 --bins 4 --threads 1",
                                 runs.prism, runs.uniform, runs.shards));
  INFO(m.output);
  REQUIRE(m.exit_code == 0);
  auto p = read_run(runs.prism + "/run.h5")["datasets"];

  {  // loss and val: one row per step, equal to the run file
    auto loss = export_csv(fmt::format("{} {} --what loss", runs.prism, runs.uniform), runs.dir);
    CHECK(loss.header == std::vector<std::string>{"run", "heads", "seed", "step", "tokens", "loss", "lr", "grad_norm", "time_s"});
    REQUIRE(loss.rows.size() == 24);
    CHECK(loss.rows[0][0] == "prism");
    CHECK(loss.rows[0][1] == "2,4");
    CHECK(loss.rows[12][0] == "uniform");
    auto want = p["train/loss"].get<std::vector<double>>();
    for (size_t i = 0; i < 12; ++i) CHECK(std::stod(loss.rows[i][col(loss, "loss")]) == want[i]);
    auto val = export_csv(fmt::format("{}/run.h5 --what val", runs.prism), runs.dir);
    CHECK(val.rows.size() == p["val/step"].size());
    // Every validation loss with its standard error and the data's unigram baseline (unknown here: empty).
    CHECK(val.header == std::vector<std::string>{"run", "heads", "seed", "step", "tokens", "loss", "loss_se",
                                                 "unigram_val_loss"});
    CHECK(std::stod(val.rows.back()[col(val, "loss_se")]) == p["val/loss_se"].back().get<double>());
    CHECK(val.rows.back()[col(val, "unigram_val_loss")].empty());
    // JSON: the same numbers, one record per row.
    auto r = run_prism(fmt::format("export {} --what loss --format json", runs.prism));
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.output);
    REQUIRE(j.size() == 12);
    CHECK(j[11]["step"] == 12);
    CHECK(j[11]["loss"].get<double>() == want[11]);
  }
  {  // distance and position: one row per head (and bin)
    auto d = export_csv(fmt::format("{} --what distance", runs.prism), runs.dir);
    // 4 training-time measurements + the held-out profile, 2 + 4 heads each.
    REQUIRE(d.rows.size() == 5 * 6);
    CHECK(d.rows.back()[col(d, "source")] == "heldout");
    auto last_train = p["attention/layer_01/distance"].back().get<std::vector<double>>();
    CHECK(std::stod(d.rows[23][col(d, "distance")]) == last_train[3]);
    CHECK(d.rows[23][col(d, "distance_normalized")].empty());  // training-time rows have none
    auto held = p["attention/heldout/layer_01/distance_normalized"].get<std::vector<double>>();
    CHECK(std::stod(d.rows.back()[col(d, "distance_normalized")]) == held[3]);
    auto pos = export_csv(fmt::format("{} --what position", runs.prism), runs.dir);
    CHECK(pos.rows.size() == 6 * 4);
    CHECK(pos.rows[3][col(pos, "position_lo")] == "24");
    CHECK(pos.rows[3][col(pos, "position_hi")] == "31");
    // The loss by position training stored (/val/by_position/T32): 6 buckets per run.
    auto byp = export_csv(fmt::format("{} {} --what loss_by_position", runs.prism, runs.uniform), runs.dir);
    REQUIRE(byp.rows.size() == 2 * 6);
    CHECK(byp.rows[5][col(byp, "position_lo")] == "16");
    CHECK(byp.rows[5][col(byp, "position_hi")] == "31");
    CHECK(byp.rows[5][col(byp, "context")] == "32");
    CHECK(byp.rows[5][col(byp, "position")] == "learned");
    auto bucket_loss = p["val/by_position/T32/loss"].get<std::vector<double>>();
    CHECK(std::stod(byp.rows[5][col(byp, "loss")]) == bucket_loss[5]);
    CHECK(byp.rows[6][col(byp, "run")] == "uniform");
  }
  {  // delta: stored, against --baseline, and a sweep's schedule against its uniform runs
    auto stored = export_csv(fmt::format("{} --what delta", runs.prism), runs.dir);
    REQUIRE(stored.rows.size() == 2);
    auto want = p["attention/delta/delta"].get<std::vector<double>>();
    CHECK(std::stod(stored.rows[1][col(stored, "delta")]) == want[1]);
    auto fresh = export_csv(fmt::format("{} --what delta --baseline {}", runs.prism, runs.uniform), runs.dir);
    REQUIRE(fresh.rows.size() == 2);
    CHECK(std::stod(fresh.rows[1][col(fresh, "delta")]) == want[1]);
    CHECK(fresh.rows[0][col(fresh, "baseline")] == "uniform");

    // A sweep directory as prism sweep lays it out, with a trial still pending.
    const fs::path sweep = runs.dir.file("sweep");
    fs::create_directories(sweep / "s-prism");
    fs::create_directories(sweep / "s-uniform");
    fs::copy_file(runs.prism + "/run.h5", sweep / "s-prism/run.h5");
    fs::copy_file(runs.uniform + "/run.h5", sweep / "s-uniform/run.h5");
    write_file((sweep / "summary.csv").string(),
               "name,group,schedule,heads,seed,train.lr,status,rung,steps,tokens,best_val_loss,final_val_loss,wall_s,"
               "tokens_all_rungs,wall_s_all_rungs,run_dir,message\n"
               "s-prism,g,\"2,4\",\"[2, 4]\",0,0.003,completed,0,12,1536,10.6,10.6,2.5,1536,2.5,s-prism,\n"
               "s-uniform,g,uniform,\"[4, 4]\",0,0.003,completed,0,12,1536,10.6,10.6,2.5,1536,2.5,s-uniform,\n"
               "s-later,g,\"2,4\",\"[2, 4]\",1,0.003,pending,0,0,0,,,0,0,0,s-later,\n");
    auto sd = export_csv(fmt::format("{} --what delta", sweep.string()), runs.dir);
    REQUIRE(sd.rows.size() == 2);
    CHECK(sd.rows[0][col(sd, "run")] == "s-prism");
    CHECK(sd.rows[0][col(sd, "baseline")] == "s-uniform");
    CHECK(std::stod(sd.rows[1][col(sd, "delta")]) == want[1]);
    auto summary = export_csv(fmt::format("{} --what summary", sweep.string()), runs.dir);
    REQUIRE(summary.rows.size() == 3);
    CHECK(summary.rows[0][col(summary, "status")] == "completed");
    CHECK(summary.rows[0][col(summary, "steps")] == "12");
    CHECK(summary.rows[0][col(summary, "train.lr")] == "0.003");
    CHECK(summary.rows[2][col(summary, "status")] == "pending");
    CHECK(summary.rows[2][col(summary, "steps")].empty());
    CHECK(std::stod(summary.rows[0][col(summary, "val_loss")]) == p["val/loss"].back().get<double>());
    CHECK(std::stod(summary.rows[0][col(summary, "val_loss_se")]) == p["val/loss_se"].back().get<double>());
    CHECK(summary.rows[0][col(summary, "unigram_val_loss")].empty());
    // Without summary.csv every run.h5 below the directory is a run.
    fs::remove(sweep / "summary.csv");
    auto scanned = export_csv(fmt::format("{} --what delta", sweep.string()), runs.dir);
    REQUIRE(scanned.rows.size() == 2);
    CHECK(std::stod(scanned.rows[0][col(scanned, "delta")]) == std::stod(sd.rows[0][col(sd, "delta")]));
  }
  {  // eval and bad requests
    auto e = export_csv(fmt::format("{} --what eval", runs.prism), runs.dir);
    CHECK(e.rows.empty());  // not evaluated: the header alone
    CHECK(e.header[3] == "task");
    CHECK(e.header.back() == "acc_bytes_stderr");
    auto r = run_prism(fmt::format("export {} --what losses", runs.prism));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("unknown export 'losses'") && Catch::Contains("loss, val, distance"));
    r = run_prism(fmt::format("export {}/nope --what loss", runs.dir.path()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("no such file or directory"));
  }
}
