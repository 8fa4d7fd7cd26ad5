// A disk that fills up while a run trains (issue 17): the run.h5 append that
// meets the full disk fails with one clear error naming run.h5 and the fix; the
// rows flushed before and the last checkpoint stay whole; once space is freed,
// --resume continues and the whole curve equals an uninterrupted run's. The
// disk is a real small tmpfs (disk_support.h); the checkpoint case of the same
// fault is test_train_run.cpp's "a full disk while checkpointing".
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>
#include <thread>

#include "disk_support.h"
#include "support.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 300;

// Attention distance at every step fills a new HDF5 chunk of /attention every 64
// rows, so run.h5 grows (and meets the full disk) long before the run ends; the
// only checkpoint before the last is the one Ctrl-C writes.
std::string config_text(const std::string& data_dir) {
  return fmt::format(
      "model: {{preset: test-tiny, vocab_size: 512}}\n"
      "schedule: {{heads: [2, 4]}}\n"
      "train: {{batch_size: 2, seq_len: 16, max_steps: {}, lr: 3.0e-3, warmup_steps: 2, eval_every: 100,\n"
      "        eval_tokens: 64, distance_every: 1, distance_batch: 1, checkpoint_every: 100000, log_every: 1,\n"
      "        threads: 1, dtype: fp32}}\n"
      "data: {{dir: {}}}\n",
      kSteps, data_dir);
}

nlohmann::json read_run(const std::string& h5) {
  auto r = run_reference("read_run.py", h5);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

// `prism train args`, started in the background with its output in `log`.
pid_t start_prism(const std::string& args, const std::string& log) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string cmd = fmt::format("exec '{}' {} >'{}' 2>&1", PRISM_BINARY, args, log);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// The last "step N/total" a run has printed (0 if none).
int last_step(const std::string& log) {
  static const std::regex step_line(R"(step +(\d+)/\d+ \|)");
  int last = 0;
  const std::string text = read_file_or_empty(log);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), step_line); it != std::sregex_iterator(); ++it)
    last = std::stoi((*it)[1]);
  return last;
}

// Waits for the run to print step `step` (false if it ended or 300 s passed first).
bool wait_for_step(pid_t pid, const std::string& log, int step) {
  for (int i = 0; i < 6000; ++i) {
    if (last_step(log) >= step) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<double> column(const nlohmann::json& run, const std::string& key) {
  return run["datasets"][key].get<std::vector<double>>();
}

}  // namespace

TEST_CASE("a full disk while training: the run.h5 append fails clearly, the run stays whole, --resume continues exactly",
          "[train][full-disk]") {
  SmallDisk disk(size_t(24) << 20);
  if (!disk.mounted()) {
    WARN("SKIPPED: " << disk.why_not());
    return;
  }
  TempDir work("prism-train-disk");
  auto shards = run_reference("make_shards.py", work.file("shards") + " --vocab 512");
  INFO(shards.output);
  REQUIRE(shards.exit_code == 0);
  const std::string config = work.file("run.yaml");
  write_file(config, config_text(work.file("shards")));
  auto reference = run_prism(fmt::format("train {} --out {}", config, work.file("reference")));
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto ref = read_run(work.file("reference/run.h5"));

  // The run on the small disk: Ctrl-C after a few steps leaves a checkpoint.
  const std::string out = disk.file("run");
  pid_t pid = start_prism(fmt::format("train {} --out {}", config, out), work.file("first.log"));
  REQUIRE(wait_for_step(pid, work.file("first.log"), 3));
  ::kill(pid, SIGINT);
  INFO(read_file_or_empty(work.file("first.log")));
  REQUIRE(wait_exit(pid) == 130);
  const std::string latest = read_file(out + "/checkpoints/latest");
  const int saved = std::stoi(latest.substr(latest.find('_') + 1));
  REQUIRE(saved < 50);

  // Continue it; once it is training, the disk fills up.
  pid = start_prism("train --resume " + out, work.file("second.log"));
  REQUIRE(wait_for_step(pid, work.file("second.log"), saved + 2));
  disk.fill();
  const int code = wait_exit(pid);
  const std::string said = read_file_or_empty(work.file("second.log"));
  INFO(said);
  CHECK(code == 1);
  CHECK(last_step(work.file("second.log")) < kSteps);  // it stopped at the full disk, not at the end
  CHECK_THAT(said, Catch::Contains("run.h5") && Catch::Contains("No space left on device") &&
                       Catch::Contains("--resume") && Catch::Contains("Fix:"));
  // What was there is whole: run.h5 opens with every row flushed before, the checkpoint is the same.
  disk.free_space();
  const auto broken = read_run(out + "/run.h5");
  const auto rows = column(broken, "train/loss").size();
  CHECK(rows >= static_cast<size_t>(saved + 2));
  CHECK(read_file(out + "/checkpoints/latest") == latest);
  CHECK(fs::exists(out + "/checkpoints/" + latest.substr(0, latest.find('\n')) + "/model.safetensors"));

  // With space again, --resume continues from the checkpoint to the same curve.
  auto resumed = run_prism("train --resume " + out);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const auto after = read_run(out + "/run.h5");
  CHECK(after["attrs"]["status"] == "completed");
  CHECK(after["datasets"]["train/step"] == ref["datasets"]["train/step"]);
  const auto a = column(ref, "train/loss"), b = column(after, "train/loss");
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(a[i] == b[i]);  // bit for bit: exact resume on the CPU
  }
  CHECK(column(ref, "val/loss") == column(after, "val/loss"));
  CHECK(ref["datasets"]["attention/distance"] == after["datasets"]["attention/distance"]);
}
