// A sweep's dry-run figures use the data's vocabulary: with `vocab_size: auto` and a
// prepared corpus, the training FLOPs per trial are 6N + attention with N counted
// from a model built on that vocabulary, not on the preset's.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include "prism/data/prepare.h"
#include "prism/model/gpt.h"
#include "prism/sweep/dry_run.h"
#include "prism/sweep/plan.h"
#include "small_corpus.h"
#include "support.h"

using namespace prism;
using namespace prism::test;

namespace {

// Matmul parameters of a built model: every 2-D weight but the position table
// (the token embedding counts once, as the tied LM head's matmul).
int64_t matmul_params(const GPT& model) {
  int64_t n = 0;
  for (const auto& p : model->named_parameters())
    if (p.value().dim() == 2 && p.key() != "wpe.weight") n += p.value().numel();
  return n;
}

// The "train FLOP" column of the dry run, per trial name.
std::map<std::string, double> dry_run_flops(const std::string& text) {
  std::map<std::string, double> out;
  static const std::regex row(R"(^\s+\d+\s+(\S+)\s+\S+\s+\d+\s+([0-9.]+e[+-]\d+)\s)");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out[m[1].str()] = std::stod(m[2].str());
  }
  return out;
}

}  // namespace

TEST_CASE("dry-run FLOPs are 6N + attention with N from a model on the data's vocabulary", "[sweep][config]") {
  TempDir dir("prism-dry-run-cost");
  REQUIRE(prepare_small_corpus(dir, 300).vocab_size == 300);

  const std::string file = dir.file("sweep.yaml");
  write_file(file, fmt::format("model: {{preset: test-tiny}}\n"
                               "data: {{dir: '{}'}}\n"
                               "train: {{max_steps: 10, batch_size: 2, seq_len: 16}}\n"
                               "sweep: {{grid: {{schedule.heads: [[2, 4]]}}}}\n",
                               dir.file("data")));
  const SweepPlan plan = plan_sweep(file);
  REQUIRE(plan.trials.size() == 2);  // [2, 4] and the uniform baseline
  const std::string shown = format_dry_run(plan, dir.file("out"), 1, 1);
  INFO(shown);
  CHECK_THAT(shown, Catch::Contains(fmt::format("vocabulary 300 (from {})", dir.file("data"))));
  const auto flops = dry_run_flops(shown);
  REQUIRE(flops.size() == 2);

  ModelConfig m = model_preset("test-tiny");
  REQUIRE(m.vocab_size != 300);  // the preset's figure would differ
  m.vocab_size = 300;
  const double T = 16, tokens = 10 * 2 * 16;
  for (const auto& t : plan.trials) {
    INFO(t.name);
    torch::NoGradGuard no_grad;
    const GPT model(m, t.schedule);
    const double N = static_cast<double>(matmul_params(model));
    const double attention = 3.0 * m.n_layer * 4.0 * T * m.d_model;  // QK^T and PV, forward + backward
    const double expected = tokens * (6.0 * N + attention);
    REQUIRE(flops.count(t.name));
    CHECK(flops.at(t.name) == Approx(expected).epsilon(1e-3));  // printed to 4 significant digits
  }
}

TEST_CASE("a sweep's dry run gives its ETA from a step measured on this machine", "[sweep][config]") {
  TempDir dir("prism-dry-run-eta");
  REQUIRE(prepare_small_corpus(dir, 300).vocab_size == 300);
  const std::string file = dir.file("sweep.yaml");
  write_file(file, fmt::format("model: {{preset: test-tiny}}\n"
                               "data: {{dir: '{}'}}\n"
                               "train: {{max_steps: 1000, batch_size: 2, seq_len: 16, dtype: fp32, device: cpu}}\n"
                               "sweep: {{grid: {{schedule.heads: [[2, 4]], train.seed: [0, 1, 2]}}}}\n",
                               dir.file("data")));
  const SweepPlan plan = plan_sweep(file);
  REQUIRE(plan.trials.size() == 6);
  const std::string shown = format_measured_eta(plan, 2, 2);
  INFO(shown);
  // One setup (the schedules differ only in FLOPs): one step timed, its time printed with how it ran.
  static const std::regex measured(R"(step time measured here: ([0-9.]+) s per step of (\S+) \(cpu, 1 thread, fp32\))");
  std::smatch m;
  REQUIRE(std::regex_search(shown, m, measured));
  const double step_s = std::stod(m[1].str());
  CHECK(step_s > 0);
  CHECK(step_s < 5);
  CHECK(m[2].str() == plan.trials[0].name);
  CHECK(std::count(shown.begin(), shown.end(), '\n') == 2);  // one setup line, the ETA line
  CHECK_THAT(shown, Catch::Contains("ETA here: about ") && Catch::Contains("for 6 of 6 trials, 2 at a time"));
  CHECK_THAT(shown, !Catch::Contains("upper bound"));

  // A device this machine lacks is named instead of measured.
  if (!torch::cuda::is_available()) {
    const SweepPlan gpu = plan_sweep(file, {"train.device=cuda"});
    const std::string none = format_measured_eta(gpu, 1, 1);
    CHECK_THAT(none, Catch::Contains("which this machine lacks") && Catch::Contains("ETA here: none"));
  }
}
