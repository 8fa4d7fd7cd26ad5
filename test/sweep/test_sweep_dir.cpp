// The sweep directory (sweep_dir.h): the lock, refusing (or, with --force, taking
// over without losing anything) a directory made by another sweep, and growing a grid.
#include <catch2/catch.hpp>

#include <filesystem>

#include "prism/error.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/sweep_dir.h"
#include "sweep/sweep_support.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

TEST_CASE("the sweep lock admits one runner, or many tasks, never both", "[sweep][lock]") {
  TempDir d("prism-lock");
  const std::string path = d.file("sweep.lock");
  {
    auto runner = SweepLock::acquire(path, SweepLock::Mode::Exclusive, 0, "running the sweep");
    CHECK_THAT(read_file(path), Catch::Contains("pid") && Catch::Contains("running the sweep"));
    try {
      SweepLock::acquire(path, SweepLock::Mode::Exclusive, 0.3, "running the sweep");
      FAIL("a second runner got the lock");
    } catch (const Error& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("in use by prism sweep (pid") && Catch::Contains("two runners"));
    }
    CHECK_THROWS_AS(SweepLock::acquire(path, SweepLock::Mode::Shared, 0, "a task"), Error);
  }
  {
    auto a = SweepLock::acquire(path, SweepLock::Mode::Shared, 0, "a task");
    auto b = SweepLock::acquire(path, SweepLock::Mode::Shared, 0, "a task");
    CHECK_THROWS_WITH(SweepLock::acquire(path, SweepLock::Mode::Exclusive, 0, "running the sweep"),
                      Catch::Contains("Slurm tasks"));
  }
  // Released with its holder: a child process holding nothing, a dead holder holding nothing.
  auto again = SweepLock::acquire(path, SweepLock::Mode::Exclusive, 0, "running the sweep");
  auto r = run("flock -n -x " + path + " true");
  CHECK(r.exit_code != 0);  // another process sees it held
}

namespace {

// Gives each trial of `plan` a finished run in `out` (a run.h5 saying "results").
void finish_trials(const std::string& out, const SweepPlan& plan) {
  for (const auto& t : plan.trials) {
    fs::create_directories(out + "/" + t.name);
    write_file(out + "/" + t.name + "/run.h5", "results");
  }
}

}  // namespace

TEST_CASE("a directory made by another sweep is refused, and --force moves what differs aside", "[sweep][dir]") {
  TempDir d("prism-sweepdir");
  write_file(d.file("a.yaml"), tiny_base("/no/data") + "sweep:\n  grid:\n    train.seed: [0, 1]\n");
  const std::string out = d.file("out");
  auto a = plan_sweep(d.file("a.yaml"));
  CHECK(prepare_sweep_dir(out, a, false, true).message().empty());
  CHECK(fs::exists(out + "/sweep.yaml"));
  CHECK(prepare_sweep_dir(out, plan_sweep(d.file("a.yaml"), {"sweep.jobs=4"}), false, true).message().empty());  // same trials
  finish_trials(out, a);
  write_file(out + "/summary.csv", "old index");

  auto b = plan_sweep(d.file("a.yaml"), {"sweep.grid.train.seed=[1,2]"});
  try {
    prepare_sweep_dir(out, b, false, true);
    FAIL("a different sweep was accepted");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("different sweep") && Catch::Contains("h4x4_seed2 is new") &&
                                          Catch::Contains("--force"));
  }
  auto c = plan_sweep(d.file("a.yaml"), {"train.lr=1.0e-3"});
  CHECK_THROWS_WITH(prepare_sweep_dir(out, c, false, true), Catch::Contains("lr: 0.003") && Catch::Contains("is now"));

  const SweepDirChange forced = prepare_sweep_dir(out, b, true, true);
  const std::string moved = forced.replaced;
  REQUIRE_FALSE(moved.empty());
  CHECK_THAT(forced.message(), Catch::Contains("--force") && Catch::Contains(moved));
  CHECK(read_file(out + "/h4x4_seed1/run.h5") == "results");       // shared and unchanged: kept
  CHECK_FALSE(fs::exists(out + "/h4x4_seed0"));                   // not in the new sweep: moved
  CHECK(read_file(moved + "/h4x4_seed0/run.h5") == "results");
  CHECK(read_file(moved + "/summary.csv") == "old index");
  CHECK_THAT(read_file(moved + "/sweep.yaml"), Catch::Contains("h4x4_seed0"));
  CHECK_THAT(read_file(out + "/sweep.yaml"), Catch::Contains("h4x4_seed2"));

  TempDir other("prism-notasweep");
  write_file(other.file("notes.txt"), "mine");
  CHECK_THROWS_WITH(prepare_sweep_dir(other.path(), a, false, true), Catch::Contains("not empty"));
}

TEST_CASE("a grid grown by more seeds keeps its finished trials without --force, but not on Slurm or with halving", "[sweep][dir]") {
  TempDir d("prism-sweepgrow");
  write_file(d.file("a.yaml"), tiny_base("/no/data") + "sweep:\n  grid:\n    train.seed: [0, 1]\n");
  const std::string out = d.file("out");
  auto a = plan_sweep(d.file("a.yaml"));
  REQUIRE(prepare_sweep_dir(out, a, false, true).message().empty());
  finish_trials(out, a);
  auto grown = plan_sweep(d.file("a.yaml"), {"sweep.grid.train.seed=[0,1,2,3]"});
  REQUIRE(grown.trials.size() == 2 * a.trials.size());
  // Slurm's array tasks name trials by index, which a grown grid renumbers: refused there.
  CHECK_THROWS_WITH(prepare_sweep_dir(out, grown, false, false), Catch::Contains("is new") && Catch::Contains("--force"));
  // A grown grid whose earlier trials changed is another sweep.
  auto changed = plan_sweep(d.file("a.yaml"), {"sweep.grid.train.seed=[0,1,2,3]", "train.lr=1.0e-3"});
  CHECK_THROWS_WITH(prepare_sweep_dir(out, changed, false, true), Catch::Contains("different sweep"));

  const SweepDirChange c = prepare_sweep_dir(out, grown, false, true);
  CHECK(c.replaced.empty());
  CHECK(c.added == a.trials.size());
  CHECK(c.kept == a.trials.size());
  CHECK_THAT(c.message(), Catch::Contains("grew") && Catch::Contains(std::to_string(c.added) + " new trials"));
  for (const auto& t : a.trials) CHECK(read_file(out + "/" + t.name + "/run.h5") == "results");  // kept in place
  for (const auto& e : fs::directory_iterator(out)) CHECK(e.path().filename().string().rfind("replaced-", 0) != 0);
  CHECK(plan_from_yaml(out + "/sweep.yaml").definition() == grown.definition());
  // Shrinking back is not growth: the trials of seeds 2-3 would be dropped from the sweep.
  CHECK_THROWS_WITH(prepare_sweep_dir(out, a, false, true), Catch::Contains("is gone"));

  // Successive halving: a new trial changes which trials each rung promotes.
  TempDir h("prism-sweepgrow-halving");
  write_file(h.file("a.yaml"), tiny_base("/no/data") +
                                   "sweep:\n  halving: {eta: 2, min_steps: 2}\n  grid:\n    train.seed: [0, 1]\n");
  const std::string hout = h.file("out");
  REQUIRE(prepare_sweep_dir(hout, plan_sweep(h.file("a.yaml")), false, true).message().empty());
  CHECK_THROWS_WITH(prepare_sweep_dir(hout, plan_sweep(h.file("a.yaml"), {"sweep.grid.train.seed=[0,1,2]"}), false, true),
                    Catch::Contains("different sweep"));
}
