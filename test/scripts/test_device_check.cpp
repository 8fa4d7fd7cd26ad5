// Rehearsal of scripts/device-check.sh without a GPU (issue 15 item 2): its stage
// logic driven with stub binaries (test/scripts/stubs: prism, prism-device-bench;
// here: nvcc, nvidia-smi, compute-sanitizer, the CUDA tests, and a `timeout` that
// logs its arguments before running the real one) and injected failures
// (PRISM_DEVICE_INJECT=stage=fail|hang). What the one real attempt on a lent GPU
// depends on:
//   - a failed or hung stage is recorded and every later stage still runs and records;
//   - a failed smoke launch runs compute-sanitizer memcheck and skips the kernel stages;
//   - the time budget holds, and no stage ever runs under `timeout 0` (no limit);
//   - results.jsonl is complete (one line per stage) and every line is valid JSON;
//   - a missing carried file fails the check in the first second, naming the file.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>

#include "support.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kStages = {"deps", "env", "build", "smoke", "tests", "correctness", "bench", "train", "racecheck"};

void write_exe(const std::string& path, const std::string& text) {
  write_file(path, text);
  chmod(path.c_str(), 0755);
}

struct Outcome {
  int exit_code = -1;
  std::string output;
  double wall_s = 0;
  std::vector<nlohmann::json> lines;          // every line of results.jsonl
  std::map<std::string, nlohmann::json> stage;  // the stage lines by name
  std::string stub_log, timeout_log;
};

// A fake carried folder, stub tools on PATH, and the script run with `env`.
struct Rehearsal {
  TempDir dir{"prism-device-check"};
  std::string device = dir.file("device"), bin = dir.file("bin"), out = dir.file("out");

  Rehearsal() {
    fs::create_directories(device + "/text");
    fs::create_directories(bin);
    write_file(device + "/gpt2.tiktoken", "abc");
    write_file(device + "/text/a.txt", "hello");
    write_file(device + "/MANIFEST", "# rehearsal\nfile gpt2.tiktoken 3 0\nfile text/a.txt 5 0\n");
    for (const char* tool : {"nvcc", "nvidia-smi"}) write_exe(bin + "/" + tool, "#!/bin/sh\necho \"stub $0\"\n");
    write_exe(bin + "/compute-sanitizer", "#!/bin/sh\necho \"sanitizer $*\" >> \"$STUB_LOG\"\necho '========= ERROR SUMMARY: 0 errors'\n");
    write_exe(bin + "/prism_device_tests", "#!/bin/sh\necho \"tests $*\" >> \"$STUB_LOG\"\necho 'All tests passed'\n");
    // The real timeout, after logging its arguments: the test reads every limit the script asked for.
    // A bash script: the stage bodies reach their `bash -c` as exported functions, which sh would drop.
    std::string real = run("command -v timeout").output;
    real = real.substr(0, real.find('\n'));
    write_exe(bin + "/timeout",
              fmt::format("#!/usr/bin/env bash\necho \"$*\" >> \"{}\"\nexec {} \"$@\"\n", dir.file("timeout.log"), real));
  }

  Outcome run_check(const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> env = {
        {"OUT", out},
        {"PATH", bin + ":" + std::getenv("PATH")},
        {"PRISM_DEVICE_DIR", device},
        {"PRISM_DEVICE_BUILD_DIR", dir.file("build")},
        {"PRISM_PYTHON", PRISM_PYTHON},
        {"PRISM_DEVICE_BENCH", source_path("test/scripts/stubs/prism-device-bench")},
        {"PRISM_DEVICE_PRISM", source_path("test/scripts/stubs/prism")},
        {"PRISM_DEVICE_TESTS_BIN", bin + "/prism_device_tests"},
        {"PRISM_COMPUTE_SANITIZER", bin + "/compute-sanitizer"},
        {"STUB_PYTHON", PRISM_PYTHON},
        {"STUB_LOG", dir.file("stub.log")},
        // env asks the Python for torch's version, which takes seconds on a loaded machine: not what this tests.
        {"PRISM_DEVICE_INJECT", "env=pass,build=pass"}};
    for (const auto& [k, v] : extra) env[k] = v;
    std::string cmd = "env";
    for (const auto& [k, v] : env) cmd += fmt::format(" '{}={}'", k, v);
    cmd += " bash " + source_path("scripts/device-check.sh");
    const auto t0 = std::chrono::steady_clock::now();
    Process p = run(cmd);
    Outcome o;
    o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.exit_code = p.exit_code;
    o.output = p.output;
    std::istringstream in(read_file_or_empty(out + "/results.jsonl"));
    for (std::string line; std::getline(in, line);) {
      INFO("results.jsonl line: " << line);
      REQUIRE_NOTHROW(o.lines.push_back(nlohmann::json::parse(line)));
      if (o.lines.back().contains("stage")) o.stage[o.lines.back()["stage"]] = o.lines.back();
    }
    o.stub_log = read_file_or_empty(dir.file("stub.log"));
    o.timeout_log = read_file_or_empty(dir.file("timeout.log"));
    return o;
  }
};

// Every stage recorded exactly once, in order, with a known status.
void check_complete(const Outcome& o) {
  INFO(o.output);
  std::vector<std::string> order;
  for (const auto& l : o.lines)
    if (l.contains("stage")) order.push_back(l["stage"]);
  CHECK(order == kStages);
  for (const auto& [name, l] : o.stage) {
    INFO("stage " << name << ": " << l.dump());
    CHECK((l["status"] == "pass" || l["status"] == "fail" || l["status"] == "timeout" || l["status"] == "skip"));
    CHECK(l["limit_s"].get<int>() >= 0);
    if (l["status"] != "skip") CHECK(l["limit_s"].get<int>() > 0);  // ran under a real limit
  }
}

// No `timeout` call was given 0 seconds (GNU timeout reads 0 as "no limit").
void check_no_unlimited_timeout(const Outcome& o) {
  std::istringstream in(o.timeout_log);
  int calls = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string w;
    while (words >> w && w.rfind("--", 0) == 0) {
    }
    INFO("timeout " << line);
    CHECK(std::stod(w) > 0);
    ++calls;
  }
  CHECK(calls > 0);
}

}  // namespace

TEST_CASE("device check: a missing carried file fails in the first second, named, and every stage is recorded",
          "[scripts][device]") {
  Rehearsal r;
  fs::remove(r.device + "/text/a.txt");
  auto o = r.run_check({});
  INFO(o.output);
  CHECK(o.exit_code != 0);
  CHECK(o.wall_s < 5.0);  // the script and its summary; a loaded machine included
  check_complete(o);
  CHECK(o.stage["deps"]["status"] == "fail");
  CHECK(o.stage["deps"]["seconds"] <= 1);  // whole seconds of `date +%s`: 0, or 1 across a tick
  CHECK_THAT(o.stage["deps"]["note"].get<std::string>(), Catch::Contains(r.device + "/text/a.txt"));
  CHECK_THAT(o.output, Catch::Contains("device-prepare.sh"));
  for (size_t i = 1; i < kStages.size(); ++i) CHECK(o.stage[kStages[i]]["status"] == "skip");
  CHECK(o.stub_log.empty());  // nothing was launched
  CHECK(fs::exists(r.out + "/summary.md"));
}

TEST_CASE("device check: failed and hung stages are recorded and every later stage still runs", "[scripts][device]") {
  Rehearsal r;
  auto o = r.run_check({{"PRISM_DEVICE_INJECT", "env=pass,build=pass,tests=fail,bench=hang"}, {"PRISM_DEVICE_LIMITS", "bench=2"}});
  INFO(o.output << "\nstub log:\n" << o.stub_log);
  check_complete(o);
  check_no_unlimited_timeout(o);
  CHECK(o.exit_code == 1);
  CHECK(o.stage["deps"]["status"] == "pass");
  CHECK(o.stage["env"]["status"] == "pass");
  CHECK(o.stage["smoke"]["status"] == "pass");
  CHECK(o.stage["tests"]["status"] == "fail");
  // After the failure: the correctness stage, kernel against float64 and the trainer on both back ends.
  CHECK(o.stage["correctness"]["status"] == "pass");
  CHECK_THAT(o.stub_log, Catch::Contains("bench check --json"));
  CHECK_THAT(o.stub_log, Catch::Contains("attention.backend=cuda") && Catch::Contains("attention.backend=sdpa"));
  CHECK(o.stage["bench"]["status"] == "timeout");
  CHECK(o.stage["bench"]["rc"] == 124);
  CHECK(o.stage["bench"]["seconds"].get<int>() <= 4);
  // After the hang: the training stage and racecheck.
  CHECK(o.stage["train"]["status"] == "pass");
  CHECK(o.stage["racecheck"]["status"] == "pass");
  CHECK_THAT(o.stub_log, Catch::Contains("sanitizer --tool racecheck"));
  CHECK_THAT(o.stub_log, !Catch::Contains("--tool memcheck"));  // the smoke launch passed
  // What the stage bodies computed from the stubs' outputs: both comparisons and the MFU.
  std::map<std::string, nlohmann::json> runs;
  for (const auto& l : o.lines)
    if (l.contains("bench") && l["bench"] == "run") runs[l["what"].get<std::string>().substr(0, 13)] = l;
  REQUIRE(runs.count("train loss: a"));
  CHECK(runs["train loss: a"]["ok"] == true);
  REQUIRE(runs.count("resume on GPU"));
  CHECK(runs["resume on GPU"]["ok"] == true);
  CHECK(runs["resume on GPU"]["max_abs_diff"] == 0.0);
  CHECK(runs["resume on GPU"]["steps"] == 10);  // steps 11-20
  REQUIRE(runs.count("tokens/s and "));
  CHECK(runs["tokens/s and "]["tokens_per_s"].get<double>() == Approx(8192 / 0.05));
  CHECK(runs["tokens/s and "]["mfu_measured_peak_pct"].get<double>() > 0);
  // Last in the training stage: a schedule search on the GPU, with the kernel.
  CHECK_THAT(o.stub_log, Catch::Contains("prism search") && Catch::Contains("search.method=mixture") &&
                             Catch::Contains("train.device=cuda train.dtype=bf16 train.threads=1 attention.backend=cuda"));
  CHECK_THAT(read_file(r.out + "/summary.md"), Catch::Contains("| bench | timeout |"));
}

TEST_CASE("device check: a failed smoke launch runs memcheck and skips the stages that need the kernel",
          "[scripts][device]") {
  Rehearsal r;
  auto o = r.run_check({{"STUB_FAIL", "smoke"}});
  INFO(o.output << "\nstub log:\n" << o.stub_log);
  check_complete(o);
  CHECK(o.stage["smoke"]["status"] == "fail");
  CHECK_THAT(o.stub_log, Catch::Contains("sanitizer --tool memcheck --error-exitcode 9"));
  CHECK_THAT(o.stub_log, Catch::Contains("bench smoke --small"));
  for (const char* s : {"tests", "correctness", "bench", "racecheck"}) {
    INFO(s);
    CHECK(o.stage[s]["status"] == "skip");
    CHECK_THAT(o.stage[s]["note"].get<std::string>(), Catch::Contains("smoke"));
  }
  CHECK_THAT(o.stub_log, !Catch::Contains("--tool racecheck"));
  CHECK_THAT(o.stub_log, !Catch::Contains("bench check"));
  // The trainer still runs, on SDPA instead of the kernel.
  CHECK(o.stage["train"]["status"] == "pass");
  CHECK_THAT(o.stub_log, Catch::Contains("bench train --backend sdpa"));
  CHECK_THAT(o.stub_log, Catch::Contains("attention.backend=sdpa"));
  bool memcheck_line = false;
  for (const auto& l : o.lines) memcheck_line = memcheck_line || (l.contains("bench") && l["bench"] == "memcheck");
  CHECK(memcheck_line);
}

TEST_CASE("device check: the budget holds, stages past it are skipped, never run without a limit", "[scripts][device]") {
  Rehearsal r;
  auto o = r.run_check({{"PRISM_DEVICE_BUDGET_S", "6"}, {"PRISM_DEVICE_INJECT", "env=pass,build=hang"}});
  INFO(o.output);
  check_complete(o);
  check_no_unlimited_timeout(o);
  CHECK(o.exit_code == 1);
  CHECK(o.stage["build"]["status"] == "timeout");
  CHECK(o.stage["build"]["limit_s"].get<int>() <= 6);
  for (size_t i = 3; i < kStages.size(); ++i) {
    INFO(kStages[i]);
    CHECK(o.stage[kStages[i]]["status"] == "skip");
    CHECK_THAT(o.stage[kStages[i]]["note"].get<std::string>(), Catch::Contains("budget spent"));
  }
  CHECK(o.wall_s < 6 + 5 + 10);  // budget + timeout's KILL grace + the summary, on a loaded machine
}
