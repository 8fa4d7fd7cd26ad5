// prism sweep end to end on a tiny model: the index and the table, rerunning,
// a runner killed mid-sweep, Ctrl-C, failing trials, the lock, successive
// halving, and bad input. Reads sweep.h5 and run.h5 back through h5py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "test_paths.h"
#include "prism/sweep/sweep_dir.h"
#include "sweep/sweep_support.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json read_h5(const std::string& script, const std::string& path) {
  auto r = run_reference(script, path);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.output);
}

double final_val(const std::string& run_dir) {
  auto j = read_h5("read_run.py", run_dir + "/run.h5");
  return j["datasets"]["val/loss"].back().get<double>();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Starts `prism <args>` in the background; returns its pid.
int start_background(const std::string& args, const std::string& log) {
  auto r = run(fmt::format("'{}' {} > '{}' 2>&1 & echo $!", PRISM_BINARY, args, log));
  return std::stoi(r.output);
}

bool wait_for(const std::function<bool()>& ok, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok();
}

int wait_exit(int pid) {
  wait_for([&] { return kill(pid, 0) != 0; }, 120);  // the shell reaps it
  return 0;
}

}  // namespace

TEST_CASE("prism sweep runs every trial and writes sweep.yaml, summary.csv, sweep.h5 and a ranked table",
          "[sweep][run]") {
  SweepFixture f;
  auto file = f.sweep_file("grid.yaml", "sweep:\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n    train.seed: [0, 1]\n");
  const std::string out = f.dir.file("out");
  auto r = run_prism(fmt::format("sweep {} --out {} --jobs 2 --threads 2", file, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("4 trials") && Catch::Contains("2 at a time, 1 thread each"));
  CHECK(count(r.output, "done ") == 4);
  CHECK_THAT(r.output, Catch::Contains("configurations ranked") && Catch::Contains("uniform") &&
                           Catch::Contains("2x2,4x2") && Catch::Contains("2/2") && Catch::Contains("baseline"));
  for (const char* t : {"h4x4_seed0", "h4x4_seed1", "h2x2-4x2_seed0", "h2x2-4x2_seed1"}) {
    CHECK(fs::exists(out + "/" + t + "/run.h5"));
    CHECK(fs::exists(out + "/" + t + "/config.yaml"));  // the resolved config, saved by the trainer
  }
  CHECK_THAT(read_file(out + "/h2x2-4x2_seed1/config.yaml"), Catch::Contains("seed: 1") && Catch::Contains("threads: 1"));
  CHECK_THAT(read_file(out + "/sweep.yaml"), Catch::Contains("h2x2-4x2_seed1") && Catch::Contains("source:"));
  const std::string csv = read_file(out + "/summary.csv");
  CHECK_THAT(csv, Catch::StartsWith("name,group,schedule,heads,seed,status,rung,steps,tokens,best_val_loss,"
                                    "final_val_loss,wall_s"));
  CHECK(count(csv, ",completed,") == 4);

  // sweep.h5 agrees with the runs' own run.h5 files.
  auto idx = read_h5("read_sweep.py", out + "/sweep.h5");
  auto& d = idx["datasets"];
  REQUIRE(d["trials/name"].size() == 4);
  std::map<std::string, double> val;
  for (size_t i = 0; i < 4; ++i) {
    const std::string name = d["trials/name"][i];
    CHECK(d["trials/status"][i] == "completed");
    CHECK(d["trials/tokens"][i] == 6 * 2 * 16);
    val[name] = d["trials/final_val_loss"][i].get<double>();
    CHECK(val[name] == Approx(final_val(out + "/" + name)).epsilon(1e-12));
  }
  CHECK(d["trials/heads"][2] == std::vector<int>{2, 2, 4, 4});
  REQUIRE(d["ranking/schedule"].size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const std::string g = d["ranking/group"][i];
    const double a = val[g + "_seed0"], b = val[g + "_seed1"];
    CHECK(d["ranking/val_loss_mean"][i].get<double>() == Approx((a + b) / 2));
    CHECK(d["ranking/val_loss_std"][i].get<double>() == Approx(std::abs(a - b) / std::sqrt(2.0)));
  }
  const double base = (val["h4x4_seed0"] + val["h4x4_seed1"]) / 2;
  const double prism = (val["h2x2-4x2_seed0"] + val["h2x2-4x2_seed1"]) / 2;
  for (size_t i = 0; i < 2; ++i)
    if (d["ranking/group"][i] == "h2x2-4x2") CHECK(d["ranking/diff_to_baseline"][i].get<double>() == Approx(prism - base));
  CHECK(d["ranking/val_loss_mean"][0].get<double>() <= d["ranking/val_loss_mean"][1].get<double>());

  // Rerunning skips every completed trial and prints the same table; --collect too.
  auto again = run_prism(fmt::format("sweep {} --out {} --jobs 2", file, out));
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(count(again.output, "(completed)") == 4);
  CHECK(count(again.output, "start ") == 0);
  auto table = again.output.substr(again.output.find("sweep grid: configurations"));
  auto collect = run_prism(fmt::format("sweep {} --collect", out));
  CHECK(collect.exit_code == 0);
  CHECK_THAT(collect.output, Catch::Contains(table.substr(0, table.find("index:"))));
  CHECK(read_file(out + "/ranking.txt") == table.substr(0, table.find("index:")));
}

TEST_CASE("a runner killed mid-sweep leaves resumable runs, the rerun skips and resumes", "[sweep][run][resume]") {
  SweepFixture f;
  auto file = f.sweep_file("long.yaml",
                           "sweep:\n  baseline: false\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n"
                           "    train.seed: [0, 1, 2]\n",
                           40);
  const std::string out = f.dir.file("out");
  const int pid = start_background(fmt::format("sweep {} --out {} train.checkpoint_every=10 --threads 1", file, out),
                                   f.dir.file("first.log"));
  // Kill the runner (SIGKILL: no chance to clean up) once one trial finished and the next has a checkpoint.
  const bool ready = wait_for(
      [&] {
        return read_record(out + "/h2x2-4x2_seed0").status == "completed" &&
               fs::exists(out + "/h2x2-4x2_seed1/checkpoints/latest");
      },
      120);
  INFO(read_file_or_empty(f.dir.file("first.log")));
  REQUIRE(ready);
  REQUIRE(kill(pid, SIGKILL) == 0);
  // Its running trial got SIGTERM with the runner's death: it checkpoints and exits.
  const std::string trial_dir = out + "/h2x2-4x2_seed1";
  // ("[/]..." keeps pgrep's pattern from matching the shell that runs pgrep.)
  REQUIRE(wait_for([&] { return run("pgrep -f '[/]" + trial_dir.substr(1) + "'").exit_code != 0; }, 60));
  CHECK_THAT(read_file(trial_dir + "/train.log"), Catch::Contains("stop requested"));
  CHECK(read_record(out + "/h2x2-4x2_seed1").status == "running");  // the runner never got to write it
  CHECK(inspect_run(out + "/h2x2-4x2_seed1").state == RunState::Resumable);
  CHECK_FALSE(fs::exists(out + "/h2x2-4x2_seed2/run.h5"));

  auto r = run_prism(fmt::format("sweep {} --out {} train.checkpoint_every=10 --threads 1", file, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("skip    h2x2-4x2_seed0 (completed)"));
  CHECK_THAT(r.output, Catch::Contains("resume  h2x2-4x2_seed1 (from step"));
  CHECK_THAT(r.output, Catch::Contains("start   h2x2-4x2_seed2"));
  CHECK_THAT(r.output, Catch::Contains("trials: 3 completed"));
  // The resumed run's record is whole: every step once.
  auto run = read_h5("read_run.py", out + "/h2x2-4x2_seed1/run.h5");
  auto steps = run["datasets"]["train/step"].get<std::vector<int64_t>>();
  REQUIRE(steps.size() == 40);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == static_cast<int64_t>(i + 1));
  CHECK(read_record(out + "/h2x2-4x2_seed1").attempts == 2);
}

TEST_CASE("Ctrl-C stops the sweep with checkpoints, the next run continues", "[sweep][run][resume]") {
  SweepFixture f;
  auto file = f.sweep_file("one.yaml", "sweep:\n  baseline: false\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n", 60);
  const std::string out = f.dir.file("out");
  const int pid = start_background(fmt::format("sweep {} --out {} train.checkpoint_every=10 --threads 1", file, out),
                                   f.dir.file("first.log"));
  REQUIRE(wait_for([&] { return fs::exists(out + "/h2x2-4x2/checkpoints/latest"); }, 120));
  REQUIRE(kill(pid, SIGINT) == 0);
  wait_exit(pid);
  const std::string log = read_file(f.dir.file("first.log"));
  INFO(log);
  CHECK_THAT(log, Catch::Contains("stopping") && Catch::Contains("stopped h2x2-4x2 at step") &&
                      Catch::Contains("rerun to continue"));
  CHECK(read_record(out + "/h2x2-4x2").status == "interrupted");
  CHECK_THAT(read_file(out + "/summary.csv"), Catch::Contains(",interrupted,"));
  auto r = run_prism(fmt::format("sweep {} --out {} train.checkpoint_every=10 --threads 1", file, out));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("resume  h2x2-4x2 (from step"));
}

TEST_CASE("a failing trial is recorded, never stops the others, and a plain rerun completes it once its cause is fixed",
          "[sweep][run][failure]") {
  SweepFixture f;
  const std::string later = f.dir.file("later-shards");
  auto file = f.sweep_file("data.yaml", fmt::format("sweep:\n  baseline: false\n  grid:\n    data.dir: [{}, {}]\n",
                                                    f.shards, later));
  const std::string out = f.dir.file("out");
  auto r = run_prism(fmt::format("sweep {} --out {} --jobs 2", file, out));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("FAILED") && Catch::Contains("data directory not found"));
  CHECK_THAT(r.output, Catch::Contains("trials: 1 completed, 1 failed") && Catch::Contains("--retry-failed"));
  const std::string csv = read_file(out + "/summary.csv");
  CHECK(count(csv, ",completed,") == 1);
  CHECK(count(csv, ",failed,") == 1);
  CHECK_THAT(csv, Catch::Contains("prism data prepare"));

  // --no-retry leaves it alone; a plain rerun tries it once more (it failed before training) and
  // fails again while the cause is there, without looping.
  auto none = run_prism(fmt::format("sweep {} --out {} --no-retry", file, out));
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.output, Catch::Contains("failed earlier"));
  auto still = run_prism(fmt::format("sweep {} --out {}", file, out));
  CHECK(still.exit_code == 1);
  CHECK(count(still.output, "retry   ") == 1);
  // The cause is fixed: a plain rerun (the same command) completes it.
  fs::copy(f.shards, later);
  auto plain = run_prism(fmt::format("sweep {} --out {}", file, out));
  INFO(plain.output);
  CHECK(plain.exit_code == 0);
  CHECK_THAT(plain.output, Catch::Contains("retry   ") && Catch::Contains("trials: 2 completed"));
}

TEST_CASE("a trial over its timeout is stopped, checkpointed and recorded as failed", "[sweep][run][failure]") {
  SweepFixture f;
  auto file = f.sweep_file("slow.yaml", "sweep:\n  baseline: false\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n", 100000);
  const std::string out = f.dir.file("out");
  auto r = run_prism(fmt::format("sweep {} --out {} --timeout 4 train.checkpoint_every=5", file, out));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("timeout h2x2-4x2 after 4 s"));
  const auto rec = read_record(out + "/h2x2-4x2");
  CHECK(rec.status == "failed");
  CHECK_THAT(rec.message, Catch::Contains("timed out") && Catch::Contains("--retry-failed resumes it"));
  CHECK(inspect_run(out + "/h2x2-4x2").checkpoint.has_value());
}

TEST_CASE("two runners never write one sweep directory, another sweep's directory needs --force",
          "[sweep][run][lock]") {
  SweepFixture f;
  auto file = f.sweep_file("a.yaml", "sweep:\n  baseline: false\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n", 3);
  const std::string out = f.dir.file("out");
  fs::create_directories(out);
  {
    auto held = SweepLock::acquire(out + "/sweep.lock", SweepLock::Mode::Exclusive, 0, "running the sweep");
    auto r = run_prism(fmt::format("sweep {} --out {}", file, out));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("in use by prism sweep (pid"));
    CHECK_FALSE(fs::exists(out + "/sweep.yaml"));
  }
  REQUIRE(run_prism(fmt::format("sweep {} --out {}", file, out)).exit_code == 0);
  auto other = run_prism(fmt::format("sweep {} --out {} train.lr=1.0e-3", file, out));
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.output, Catch::Contains("made by a different sweep") && Catch::Contains("--force"));
  auto forced = run_prism(fmt::format("sweep {} --out {} train.lr=1.0e-3 --force", file, out));
  INFO(forced.output);
  CHECK(forced.exit_code == 0);
  CHECK_THAT(forced.output, Catch::Contains("moved to"));
  bool kept = false;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("replaced-", 0) == 0) kept = fs::exists(e.path() / "h2x2-4x2" / "run.h5");
  CHECK(kept);  // the previous run was moved aside, not deleted
}

TEST_CASE("successive halving promotes by validation loss, records its decisions and trains less",
          "[sweep][run][halving]") {
  SweepFixture f;
  auto file = f.sweep_file("sha.yaml",
                           "sweep:\n  halving: {eta: 2, min_steps: 2, noise_k: 0}\n  grid:\n"
                           "    schedule.heads: [[1, 1, 4, 4], [2, 2, 4, 4], [2, 4, 4, 4]]\n    train.seed: [0, 1]\n",
                           8);
  const std::string out = f.dir.file("out");
  auto r = run_prism(fmt::format("sweep {} --out {} --jobs 2", file, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("successive halving (eta 2): rungs at 2, 4, 8 steps"));
  CHECK_THAT(r.output, Catch::Contains("% of the full grid"));
  // Rung 0: every configuration; the decisions follow the mean final validation loss over seeds.
  const char* groups[] = {"h4x4", "h1x2-4x2", "h2x2-4x2", "h2-4x3"};
  std::vector<std::pair<double, std::string>> rung0;
  for (const char* g : groups) {
    const double a = final_val(out + "/" + g + "_seed0/rung0"), b = final_val(out + "/" + g + "_seed1/rung0");
    rung0.emplace_back((a + b) / 2, g);
  }
  std::sort(rung0.begin(), rung0.end());
  const std::string halving = read_file(out + "/halving.csv");
  INFO(halving);
  CHECK_THAT(halving, Catch::StartsWith("rung,steps,group,val_loss,rank,promoted,reason\n"));
  // keep ceil(3 / 2) = 2 of the schedules besides the baseline, which always goes up
  int schedules_seen = 0;
  for (size_t i = 0; i < 4; ++i) {
    const bool base = rung0[i].second == std::string("h4x4");
    const bool top = !base && schedules_seen++ < 2;
    const std::string reason = base ? "baseline" : top ? "top 2 of 3" : "pruned";
    CHECK_THAT(halving, Catch::Contains(fmt::format("0,2,{},{:.6f},{},{},{}", rung0[i].second, rung0[i].first, i + 1,
                                                    base || top ? 1 : 0, reason)));
    if (!base && !top) CHECK_FALSE(fs::exists(out + "/" + rung0[i].second + "_seed0/rung1"));
  }
  // The last rung runs the full budget; pruned trials say where they stopped.
  auto idx = read_h5("read_sweep.py", out + "/sweep.h5");
  auto& d = idx["datasets"];
  CHECK(d["halving/budgets"] == std::vector<int64_t>{2, 4, 8});
  for (size_t i = 0; i < d["trials/name"].size(); ++i) {
    const std::string name = d["trials/name"][i];
    int64_t tokens = 0;  // what its rung runs trained: budget x 32 tokens each
    for (int k = 0; k < 3; ++k)
      if (fs::exists(out + "/" + name + "/rung" + std::to_string(k) + "/run.h5")) tokens += (2 << k) * 32;
    CHECK(d["trials/tokens_all_rungs"][i].get<int64_t>() == tokens);
    if (d["trials/status"][i] == "completed") CHECK(d["trials/steps"][i] == 8);
    else CHECK(d["trials/status"][i] == "pruned");
  }
  CHECK(d["ranking/group"].size() >= 2);
  CHECK_THAT(read_file(out + "/summary.csv"), Catch::Contains("stopped by successive halving after rung"));
}

TEST_CASE("halving with rung_seeds runs the first seeds at the lower rungs and every seed at the last",
          "[sweep][run][halving]") {
  SweepFixture f;
  auto file = f.sweep_file("seeds.yaml",
                           "sweep:\n  halving: {eta: 3, min_steps: 2, rung_seeds: 2, noise_k: 0}\n  grid:\n"
                           "    schedule.heads: [[1, 1, 4, 4], [2, 2, 4, 4], [2, 4, 4, 4]]\n    train.seed: [0, 1, 2]\n",
                           6);
  const std::string out = f.dir.file("out");
  auto r = run_prism(fmt::format("sweep {} --out {} --jobs 2", file, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Rung 0 (2 steps): 4 configurations x seeds 0 and 1; seed 2 never runs there.
  for (const char* g : {"h4x4", "h1x2-4x2", "h2x2-4x2", "h2-4x3"}) {
    CHECK(fs::exists(out + "/" + g + "_seed0/rung0/run.h5"));
    CHECK(fs::exists(out + "/" + g + "_seed1/rung0/run.h5"));
    CHECK_FALSE(fs::exists(out + "/" + g + "_seed2/rung0"));
  }
  // Rung 1 (6 steps, the last): every promoted configuration with all three seeds, the baseline among them.
  for (int seed = 0; seed < 3; ++seed) CHECK(fs::exists(out + fmt::format("/h4x4_seed{}/rung1/run.h5", seed)));
  const std::string csv = read_file(out + "/summary.csv");
  CHECK(count(csv, ",completed,") % 3 == 0);
  CHECK(count(csv, ",completed,") >= 6);
  CHECK(count(csv, ",completed,") + count(csv, ",pruned,") == 12);
  CHECK_THAT(csv, Catch::Contains("not run: its configuration was stopped"));
  CHECK_THAT(r.output, Catch::Contains("trials:") && !Catch::Contains("pending"));
}

TEST_CASE("bad sweeps at the command line: clear errors, nothing written", "[sweep][run][input]") {
  SweepFixture f;
  const std::string out = f.dir.file("out");
  auto empty = run_prism(fmt::format("sweep {} --out {}", f.sweep_file("e.yaml", "sweep:\n  grid: {train.seed: []}\n"), out));
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.output, Catch::Contains("search space is empty"));
  auto invalid = run_prism(fmt::format("sweep {} --out {}",
                                       f.sweep_file("i.yaml", "sweep:\n  grid: {schedule.heads: [[4, 4, 4, 2]]}\n"), out));
  CHECK(invalid.exit_code == 2);
  CHECK_THAT(invalid.output, Catch::Contains("trial h4x3-2") && (Catch::Contains("rule 2") || Catch::Contains("rule 3")));
  auto conflict = run_prism(fmt::format("sweep {} --out {} train.seed=4",
                                        f.sweep_file("c.yaml", "sweep:\n  grid: {train.seed: [0, 1]}\n"), out));
  CHECK(conflict.exit_code == 2);
  CHECK_THAT(conflict.output, Catch::Contains("conflicts with the swept key train.seed"));
  auto dry = run_prism(fmt::format("sweep {} --out {} --dry-run",
                                   f.sweep_file("d.yaml", "sweep:\n  grid: {train.seed: [0, 1], train.lr: [1.0e-3, 2.0e-3]}\n"),
                                   out));
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  CHECK_THAT(dry.output, Catch::Contains("4 trials, axes: schedule x train.seed x train.lr") &&
                             Catch::Contains("h4x4_seed1_lr2.0e-3") && Catch::Contains("nothing was run"));
  CHECK_FALSE(fs::exists(out));
  auto printed = run_prism(fmt::format("sweep {} --print-config train.lr=5.0e-3", f.dir.file("d.yaml")));
  INFO(printed.output);
  // The resolved base config (as prism train --print-config prints it: the parsed value, not
  // the override's spelling), then the sweep section.
  CHECK(printed.exit_code == 0);
  CHECK_THAT(printed.output, Catch::Contains("lr: 0.005") && Catch::Contains("grid:"));
}
