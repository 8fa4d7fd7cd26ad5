// The local launcher (local_launcher.h) with a stand-in for `prism train` that
// crashes, hangs or fails on cue and runs the real trainer otherwise: failures
// stay with their trial, are recorded, and reruns follow the resume rules.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "test_paths.h"
#include "prism/sweep/local_launcher.h"
#include "prism/sweep/sweep_dir.h"
#include "sweep/sweep_support.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

// `prism train CONFIG --out DIR ...` or `prism train --resume DIR ...`; the cue is a comment in the config.
const char* kStandIn = R"SH(#!/bin/bash
if [ "$2" = "--resume" ]; then dir=$3; cfg=$3/trial.yaml; else cfg=$2; dir=$4; fi
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS $*" >> "$dir/calls.txt"
case "$(head -1 "$cfg")" in
  "# crash") kill -SEGV $$ ;;
  "# hang") trap '' TERM; sleep 60 ;;
  "# fail") echo "prism train: error: the data ran out. Fix: add data"; exit 2 ;;
  "# fail-late")  # trains, then fails as a run that diverged does: run.h5 says failed
    "$PRISM_REAL" "$@" > /dev/null || exit 3
    "$PRISM_PY" -c "import h5py; f=h5py.File('$dir/run.h5','r+'); f.attrs['status']='failed'" || exit 3
    echo "prism train: training diverged at step 4"; exit 1 ;;
esac
exec "$PRISM_REAL" "$@"
)SH";

struct Runs {
  SweepFixture f;
  std::vector<Trial> trials;
  std::vector<TrialRun> runs;
  std::string stand_in = f.dir.file("prism-stand-in");
  std::vector<std::string> log;
  explicit Runs(const std::vector<std::string>& cues) {
    write_file(stand_in, kStandIn);
    fs::permissions(stand_in, fs::perms::owner_all);
    setenv("PRISM_REAL", PRISM_BINARY, 1);
    setenv("PRISM_PY", PRISM_PYTHON, 1);
    trials.resize(cues.size());
    for (size_t i = 0; i < cues.size(); ++i) {
      trials[i].name = fmt::format("t{}-{}", i, cues[i]);
      TrialRun r;
      r.trial = &trials[i];
      r.dir = f.dir.file("sweep/" + trials[i].name);
      r.config = "# " + cues[i] + "\n" + tiny_base(f.shards, 4);
      r.label = trials[i].name;
      runs.push_back(r);
    }
  }
  LaunchReport launch(int jobs, RetryPolicy retry = RetryPolicy::Untrained, double timeout = 0) {
    LaunchOptions o;
    o.prism = stand_in;
    o.jobs = jobs;
    o.threads = 1;
    o.timeout_s = timeout;
    o.grace_s = 1;
    o.retry = retry;
    o.log = [&](const std::string& s) { log.push_back(s); };
    return launch_local(runs, o);
  }
  RunRecord record(size_t i) { return read_record(runs[i].dir); }
  std::string all_log() const {
    std::string s;
    for (const auto& l : log) s += l + "\n";
    return s;
  }
};

}  // namespace

TEST_CASE("a crashing, hanging or failing trial never stops the others and is recorded", "[sweep][launcher]") {
  Runs r({"ok", "crash", "hang", "fail", "ok", "fail-late"});
  const auto rep = r.launch(2, RetryPolicy::Untrained, 8.0);
  INFO(r.all_log());
  CHECK(rep.completed == 2);
  CHECK(rep.failed == 4);
  CHECK(r.record(0).status == "completed");
  CHECK(r.record(4).status == "completed");
  CHECK(inspect_run(r.runs[4].dir).state == RunState::Completed);
  CHECK(r.record(1).status == "failed");
  CHECK_THAT(r.record(1).message, Catch::Contains("crashed (signal 11)"));
  CHECK(r.record(2).status == "failed");
  CHECK_THAT(r.record(2).message, Catch::Contains("timed out after"));  // ignored SIGTERM: killed after the grace
  CHECK(r.record(2).exit_code == 128 + 9);
  CHECK(r.record(3).status == "failed");
  CHECK_THAT(r.record(3).message, Catch::Contains("exit code 2") && Catch::Contains("the data ran out"));
  CHECK(r.record(3).attempts == 1);
  CHECK(r.record(5).status == "failed");
  CHECK_THAT(r.record(5).message, Catch::Contains("training diverged"));
  CHECK(inspect_run(r.runs[5].dir).trained);
  CHECK_FALSE(inspect_run(r.runs[3].dir).trained);
  // Threads: each run was told its share, in the config and the environment.
  CHECK_THAT(read_file(r.runs[0].dir + "/calls.txt"),
             Catch::Contains("OMP_NUM_THREADS=1") && Catch::Contains("train.threads=1"));

  r.runs.erase(r.runs.begin() + 2);  // not the hanging one from here on: keep this test short
  // Now: 0 ok, 1 crash, 2 fail, 3 ok, 4 fail-late.

  // No retries: completed and failed runs are left alone.
  r.log.clear();
  auto none = r.launch(2, RetryPolicy::None);
  CHECK(none.skipped_completed == 2);
  CHECK(none.skipped_failed == 3);
  CHECK(none.completed + none.failed == 0);
  CHECK_THAT(r.all_log(), Catch::Contains("--retry-failed reruns it"));

  // A plain rerun retries what failed before training (and fails again here: one more attempt
  // recorded), and leaves the run that failed while training alone.
  r.log.clear();
  auto again = r.launch(2);
  INFO(r.all_log());
  CHECK(again.skipped_completed == 2);
  CHECK(again.skipped_failed == 1);
  CHECK(again.failed == 2);
  CHECK_THAT(r.all_log(), Catch::Contains("retry   t3-fail (it failed before training"));
  CHECK(r.record(1).attempts == 2);
  CHECK(r.record(2).attempts == 2);
  CHECK(r.record(4).attempts == 1);

  // --retry-failed: every failed run runs again, the one that trained from its checkpoint.
  auto all = r.launch(2, RetryPolicy::All);
  CHECK(all.skipped_completed == 2);
  CHECK(all.failed == 3);
  CHECK(r.record(1).attempts == 3);
  CHECK(r.record(4).attempts == 2);
  CHECK_THAT(read_file(r.runs[4].dir + "/calls.txt"), Catch::Contains("--resume"));
}

TEST_CASE("a run interrupted without a checkpoint starts over, with one it resumes", "[sweep][launcher]") {
  Runs r({"ok", "ok"});
  // Run 0: a run.h5 from an attempt killed before its first checkpoint.
  auto first = r.launch(1);
  REQUIRE(first.completed == 2);
  fs::remove_all(r.runs[0].dir + "/checkpoints");
  {
    RunRecord rec = r.record(0);
    rec.status = "running";  // as a killed runner leaves it
    write_record(r.runs[0].dir, rec);
  }
  // Make the run look unfinished: the trainer's status attribute says so after a kill; here,
  // rewrite it through h5py.
  auto py = run(fmt::format("'{}' -c \"import h5py; f=h5py.File('{}/run.h5','r+'); f.attrs['status']='running'\"",
                            PRISM_PYTHON, r.runs[0].dir));
  REQUIRE(py.exit_code == 0);
  CHECK(inspect_run(r.runs[0].dir).state == RunState::Restart);
  r.log.clear();
  auto second = r.launch(1);
  INFO(r.all_log());
  CHECK(second.completed == 1);
  CHECK(second.skipped_completed == 1);
  CHECK_THAT(read_file(r.runs[0].dir + "/calls.txt"), Catch::Contains("--force"));
  CHECK(r.record(0).attempts == 2);
}

TEST_CASE("a trial's binary that a build is rewriting is waited for, and a missing one is an error", "[sweep][launcher]") {
  TempDir dir;
  const std::string bin = dir.file("prism-being-linked");
  const std::string log = dir.file("trial.log");
  // A linker holds its output open for writing while it writes it: execve says ETXTBSY until it closes.
  auto writer = std::make_unique<std::ofstream>(bin);
  *writer << "#!/bin/sh\necho started \"$@\"\n" << std::flush;
  fs::permissions(bin, fs::perms::owner_all);
  CHECK_THROWS_WITH(spawn_prism(bin, {"train"}, log, 1, false, 0.0), Catch::Contains("Text file busy"));
  std::thread linker([&]() {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    writer.reset();
  });
  const pid_t pid = spawn_prism(bin, {"train", "x.yaml"}, log, 1, false, 30.0);
  linker.join();
  int status = -1;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_THAT(read_file(log), Catch::Contains("started train x.yaml"));

  // A binary that is not there (and does not appear) is an error that names it and why.
  const std::string gone = dir.file("no-such-prism");
  CHECK_THROWS_WITH(spawn_prism(gone, {"train"}, log, 1, false, 0.3),
                    Catch::Contains("cannot execute " + gone) && Catch::Contains("No such file"));
}
