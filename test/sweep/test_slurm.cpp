// The Slurm launcher: the job scripts, their tasks executed here one by one
// (always), and a real single-node Slurm cluster ([slurm], opt-in: it needs root
// and Debian's slurm-wlm + munge; test/sweep/slurm_cluster.sh starts it).
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "test_paths.h"
#include "sweep/sweep_support.h"
#include "train/run_compare.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

const char* kSlurmSweep =
    "sweep:\n"
    "  halving: {eta: 2, min_steps: 3}\n"
    "  slurm: {time: \"00:10:00\", mem: 1G, cpus_per_task: 1, extra: [\"--comment=prism-test\"]}\n"
    "  grid:\n    schedule.heads: [[2, 2, 4, 4], [1, 1, 4, 4]]\n    train.seed: [0]\n";

std::vector<int> array_indices(const std::string& script) {
  std::smatch m;
  REQUIRE(std::regex_search(script, m, std::regex("#SBATCH --array=([0-9,\\-]+)")));
  std::vector<int> out;
  std::stringstream ss(m[1].str());
  for (std::string part; std::getline(ss, part, ',');) {
    auto dash = part.find('-');
    const int a = std::stoi(part.substr(0, dash)), b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
    for (int i = a; i <= b; ++i) out.push_back(i);
  }
  return out;
}

// A private single-node Slurm (test/sweep/slurm_cluster.sh) for one test, stopped when it ends.
// Needs root + slurm-wlm + munge; the script says which is missing.
struct SlurmCluster {
  std::string state, env, script = source_path("test/sweep/slurm_cluster.sh");
  explicit SlurmCluster(std::string dir) : state(std::move(dir)), env(fmt::format("SLURM_CONF='{}/slurm.conf' ", state)) {
    auto up = run(fmt::format("'{}' start '{}' 2>/dev/null", script, state));
    INFO(up.output);
    REQUIRE(up.exit_code == 0);
  }
  ~SlurmCluster() { run(fmt::format("'{}' stop '{}'", script, state)); }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;
};

}  // namespace

TEST_CASE("the slurm launcher writes job arrays whose tasks, run here, finish the sweep wave by wave",
          "[sweep][slurm-script]") {
  SweepFixture f;
  auto file = f.sweep_file("s.yaml", kSlurmSweep);
  const std::string out = f.dir.file("out");
  auto first = run_prism(fmt::format("sweep {} --out {} --launcher slurm --no-submit", file, out));
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.output, Catch::Contains("sbatch --parsable") && Catch::Contains("--dependency=afterany:$jobid"));
  const std::string script = read_file(out + "/slurm/wave-0.sh");
  CHECK_THAT(script, Catch::StartsWith("#!/bin/bash\n"));
  CHECK_THAT(script, Catch::Contains("#SBATCH --array=0-2\n") && Catch::Contains("#SBATCH --cpus-per-task=1\n") &&
                         Catch::Contains("#SBATCH --time=00:10:00\n") && Catch::Contains("#SBATCH --mem=1G\n") &&
                         Catch::Contains("#SBATCH --comment=prism-test\n") &&
                         Catch::Contains("--task-index \"$SLURM_ARRAY_TASK_ID\" --rung 0"));
  CHECK_THAT(script, Catch::Contains("#SBATCH --signal=B:USR1@120\n") && Catch::Contains("#SBATCH --requeue\n"));
  const std::string collect = read_file(out + "/slurm/wave-0-collect.sh");
  CHECK_THAT(collect, Catch::Contains("sweep '" + fs::absolute(out).string() + "' --launcher slurm"));
  // Bookkeeping gets sweep.slurm.collect's resources, never the trials' extra lines (their GPUs).
  CHECK_THAT(collect, Catch::Contains("#SBATCH --time=00:30:00\n") && Catch::Contains("#SBATCH --mem=2G\n") &&
                          Catch::Contains("#SBATCH --cpus-per-task=1\n") && !Catch::Contains("--comment=prism-test") &&
                          !Catch::Contains("--requeue"));
  // A task outside the sweep is refused.
  auto bad = run_prism(fmt::format("sweep {} --task-index 7", out));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("task index 7 is not a trial"));

  // Play Slurm: run every task of each wave, then the collection step, until it says it is done.
  for (int wave = 0; wave < 4; ++wave) {
    const std::string w = fmt::format("{}/slurm/wave-{}.sh", out, wave);
    REQUIRE(fs::exists(w));
    for (int i : array_indices(read_file(w))) {
      auto task = run(fmt::format("SLURM_ARRAY_TASK_ID={} SLURM_CPUS_PER_TASK=1 bash {}", i, w));
      INFO(task.output);
      CHECK(task.exit_code == 0);
    }
    auto collect = run_prism(fmt::format("sweep {} --launcher slurm --no-submit", out));
    INFO(collect.output);
    REQUIRE(collect.exit_code == 0);
    if (collect.output.find("configurations ranked") != std::string::npos) {
      CHECK(wave == 1);  // two rungs: two waves
      CHECK_THAT(collect.output, Catch::Contains("trials: ") && Catch::Contains("successive halving"));
      CHECK(fs::exists(out + "/sweep.h5"));
      return;
    }
    CHECK_THAT(read_file(fmt::format("{}/slurm/wave-{}.sh", out, wave + 1)), Catch::Contains("--rung 1"));
  }
  FAIL("the sweep did not finish in 4 waves");
}

TEST_CASE("a real single-node Slurm runs the sweep: array jobs, collection jobs, the final table", "[.][slurm]") {
  SweepFixture f;
  const SlurmCluster cluster(f.dir.file("slurm-state"));
  const std::string& state = cluster.state;
  const std::string& env = cluster.env;

  auto file = f.sweep_file("s.yaml", kSlurmSweep);
  const std::string out = f.dir.file("out");
  auto sub = run(env + fmt::format("'{}' sweep {} --out {} --launcher slurm", PRISM_BINARY, file, out));
  INFO(sub.output);
  REQUIRE(sub.exit_code == 0);
  CHECK_THAT(sub.output, Catch::Contains("submitted wave 0: array job"));
  // The collection jobs chain the waves; wait for the last one to print the table.
  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  std::string final_out;
  while (std::chrono::steady_clock::now() < end) {
    for (int w = 0; w < 4; ++w) {
      const std::string o = read_file_or_empty(fmt::format("{}/slurm/wave-{}-collect.out", out, w));
      if (o.find("configurations ranked") != std::string::npos) final_out = o;
    }
    auto q = run(env + "squeue -h");
    if (!final_out.empty() && q.output.empty()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  INFO(run(env + "squeue").output);
  INFO(run("tail -n 20 " + state + "/log/slurmctld.log").output);
  REQUIRE_FALSE(final_out.empty());
  CHECK_THAT(final_out, Catch::Contains("successive halving") && Catch::Contains("trials: "));
  CHECK(fs::exists(out + "/slurm/wave-1.sh"));  // rung 1 went out as a second wave
  const std::string csv = read_file(out + "/summary.csv");
  CHECK(csv.find(",failed,") == std::string::npos);
  CHECK(csv.find(",pending,") == std::string::npos);
  // Each task ran where Slurm put it, with Slurm's CPU count as its threads.
  CHECK_THAT(read_file(out + "/h4x4_seed0/rung0/config.yaml"), Catch::Contains("threads: 1"));
}

namespace {

// The config of a trial that trains for about 100 s on one thread here: longer than a
// 1-minute time limit. GPT-2's vocabulary makes the output layer the bulk of each step.
std::string long_trial(const std::string& data_dir, int steps) {
  return fmt::format(
      "model: {{preset: test-tiny, vocab_size: 50257, n_layer: 4}}\n"
      "schedule: {{heads: [4, 4, 4, 4]}}\n"
      "train: {{batch_size: 16, seq_len: 32, max_steps: {}, lr: 1.0e-3, warmup_steps: 10, eval_every: 100,\n"
      "        eval_tokens: 512, distance_every: 0, distance_batch: 1, checkpoint_every: 0, log_every: 10,\n"
      "        dtype: fp32}}\n"
      "data: {{dir: {}}}\n"
      "sweep:\n"
      "  threads: 1\n"
      "  slurm: {{time: \"1\", cpus_per_task: 1, signal_seconds: 20, max_requeues: 20}}\n"
      "  grid:\n    train.seed: [0]\n",
      steps, data_dir);
}

}  // namespace

TEST_CASE("a trial longer than its 1-minute time limit finishes through requeues with the uninterrupted curve",
          "[.][slurm]") {
  SweepFixture f;
  const SlurmCluster cluster(f.dir.file("slurm-state"));
  const std::string& state = cluster.state;
  const std::string& env = cluster.env;

  const std::string file = f.dir.file("long.yaml");
  write_file(file, long_trial(f.shards, 500));
  const std::string out = f.dir.file("out");
  auto sub = run(env + fmt::format("'{}' sweep {} --out {} --launcher slurm", PRISM_BINARY, file, out));
  INFO(sub.output);
  REQUIRE(sub.exit_code == 0);
  const std::string script = read_file(out + "/slurm/wave-0.sh");
  CHECK_THAT(script, Catch::Contains("#SBATCH --signal=B:USR1@20\n") && Catch::Contains("#SBATCH --requeue\n") &&
                         Catch::Contains("#SBATCH --open-mode=append\n") && Catch::Contains("#SBATCH --time=1\n"));

  // The same trial, uninterrupted, on this machine's other core while Slurm runs it.
  std::string trial_dir;
  for (int i = 0; i < 600 && trial_dir.empty(); ++i) {
    for (const auto& e : fs::directory_iterator(out))
      if (fs::exists(e.path() / "trial.yaml")) trial_dir = e.path().string();
    if (trial_dir.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE_FALSE(trial_dir.empty());
  const std::string ref = f.dir.file("reference");
  Process reference;
  std::thread ref_thread([&] {
    reference = run_prism(fmt::format("train {}/trial.yaml --out {} train.threads=1", trial_dir, ref));
  });

  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(12);
  std::string collect;
  while (std::chrono::steady_clock::now() < end) {
    collect = read_file_or_empty(out + "/slurm/wave-0-collect.out");
    if (collect.find("configurations ranked") != std::string::npos && run(env + "squeue -h").output.empty()) break;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  ref_thread.join();
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const std::string task_log = read_file_or_empty(out + "/slurm/wave-0-0.out");
  INFO(task_log);
  INFO(run(env + "squeue").output);
  INFO(run("tail -n 20 " + state + "/log/slurmctld.log").output);
  REQUIRE_THAT(collect, Catch::Contains("configurations ranked"));
  // Requeued at least once, by the task itself, within the first wave: no second wave was needed.
  CHECK_THAT(task_log, Catch::Contains("requeueing job") && Catch::Contains("(restart 1)"));
  CHECK_FALSE(fs::exists(out + "/slurm/wave-1.sh"));
  CHECK_THAT(read_file(trial_dir + "/train.log"), Catch::Contains("stopped by SIGUSR1 after step"));
  const std::string csv = read_file(out + "/summary.csv");
  CHECK(csv.find(",completed,") != std::string::npos);
  // Bit for bit the uninterrupted run's curve (CPU, fp32, one thread each).
  auto a = read_run(ref + "/run.h5"), b = read_run(trial_dir + "/run.h5");
  CHECK(b["attrs"]["status"] == "completed");
  for (const char* key : {"train/step", "train/loss", "train/grad_norm", "train/lr", "val/step", "val/loss"}) {
    INFO(key);
    CHECK(a["datasets"][key] == b["datasets"][key]);
  }
}
