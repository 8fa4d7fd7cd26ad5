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
  CHECK_THAT(read_file(out + "/slurm/wave-0-collect.sh"), Catch::Contains("sweep '" + fs::absolute(out).string() +
                                                                          "' --launcher slurm"));
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
  const std::string state = f.dir.file("slurm-state");
  const std::string cluster = source_path("test/sweep/slurm_cluster.sh");
  auto up = run(fmt::format("'{}' start '{}' 2>/dev/null", cluster, state));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);  // needs root + slurm-wlm + munge; the script says which is missing
  const std::string conf = state + "/slurm.conf";
  struct Down {
    std::string cmd;
    ~Down() { run(cmd); }
  } down{fmt::format("'{}' stop '{}'", cluster, state)};
  const std::string env = fmt::format("SLURM_CONF='{}' ", conf);

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
