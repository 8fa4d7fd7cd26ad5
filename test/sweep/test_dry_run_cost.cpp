// A sweep's dry-run figures use the data's vocabulary: with `vocab_size: auto` and a
// prepared corpus, the training FLOPs per trial are 6N + attention with N counted
// from a model built on that vocabulary, not on the preset's.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <regex>
#include <sstream>

#include "prism/data/prepare.h"
#include "prism/model/gpt.h"
#include "prism/stats/stats.h"
#include "prism/sweep/dry_run.h"
#include "prism/sweep/index.h"
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

static std::string plan_to_yaml_file(const SweepPlan& plan, const std::string& path) {
  write_file(path, plan_to_yaml(plan));
  return path;
}

TEST_CASE("a sweep's dry run plans its seeds: detectable effect, seeds for the target, their cost", "[sweep][config][stats]") {
  TempDir dir("prism-dry-run-power");
  REQUIRE(prepare_small_corpus(dir, 300).vocab_size == 300);
  const std::string base = fmt::format("model: {{preset: test-tiny}}\ndata: {{dir: '{}'}}\n"
                                       "train: {{max_steps: 4, batch_size: 2, seq_len: 16, dtype: fp32, eval_every: 0, "
                                       "eval_tokens: 64, distance_every: 0, checkpoint_every: 0, log_every: 2}}\n",
                                       dir.file("data"));
  // Stated: sd 0.013 with its source; 6 seeds of 2 schedules against uniform.
  write_file(dir.file("stated.yaml"),
             base + "sweep:\n  power: {sd: 0.013, source: 'a pilot of 6 seeds'}\n  grid:\n"
                    "    schedule.heads: [[2, 4], [1, 4]]\n    train.seed: [0, 1, 2, 3, 4, 5]\n");
  const SweepPlan stated = plan_sweep(dir.file("stated.yaml"));
  const std::string text = format_power_plan(stated, "");
  INFO(text);
  CHECK_THAT(text, Catch::Contains("2 comparisons against uniform, Holm's first step at 0.025") &&
                       Catch::Contains("0.0130 nats, as sweep.power states (source: a pilot of 6 seeds)"));
  CHECK_THAT(text, Catch::Contains(fmt::format("with this grid's 6 seeds: detects {:.4f} nats ({:.4f} at Holm's first step)",
                                               min_detectable_effect(0.013, 6, 0.05), min_detectable_effect(0.013, 6, 0.025))));
  CHECK(min_detectable_effect(0.013, 6, 0.05) == Approx(0.013 * 1.4345451395119289));  // statsmodels' solve_power
  const int n = pairs_for_effect(0.01, 0.013, 0.05), nh = pairs_for_effect(0.01, 0.013, 0.025);
  CHECK(n == 16);
  CHECK_THAT(text, Catch::Contains(fmt::format("to detect 0.0100 nats (the CPU study's target; no paper scale): {} seeds (", n)) &&
                       Catch::Contains(fmt::format("; {} at Holm's first step (", nh)) &&
                       Catch::Contains("this grid's 6 seeds are fewer than the 16 the target needs"));
  // The cost of one comparison (uniform and one schedule) beside the whole grid's: 2 of the 3 arms.
  static const std::regex costs(R"(16 seeds \(one comparison ([0-9.e+]+) training FLOPs; the whole grid ([0-9.e+]+)\))");
  std::smatch cm;
  REQUIRE(std::regex_search(text, cm, costs));
  CHECK(std::stod(cm[1].str()) / std::stod(cm[2].str()) == Approx(2.0 / 3).epsilon(0.02));
  // One seed: no paired interval, said so.
  write_file(dir.file("one.yaml"), base + "sweep:\n  power: {sd: 0.013, source: 'stated'}\n  grid:\n"
                                          "    schedule.heads: [[2, 4]]\n");
  const std::string one = format_power_plan(plan_sweep(dir.file("one.yaml")), "");
  CHECK_THAT(one, Catch::Contains("with this grid's 1 seed: no paired interval") &&
                      Catch::Contains("this grid's 1 seed is fewer than the 16 the target needs"));
  // Without an sd it says so, and how to give one.
  write_file(dir.file("none.yaml"), base + "sweep:\n  grid:\n    schedule.heads: [[2, 4]]\n    train.seed: [0, 1]\n");
  CHECK_THAT(format_power_plan(plan_sweep(dir.file("none.yaml")), ""), Catch::Contains("no sd of Prism - uniform") &&
                                                                           Catch::Contains("--pilot DIR"));
  // sweep.sequential: the design's looks, its level, and its simulated operating characteristics.
  write_file(dir.file("seq.yaml"), base + "sweep:\n  power: {sd: 0.013, source: 'stated'}\n  sequential: {first: 3, step: 3, cap: 12}\n"
                                          "  grid:\n    schedule.heads: [[2, 4]]\n    train.seed: [0, 1, 2]\n");
  const SweepPlan seq = plan_sweep(dir.file("seq.yaml"));
  CHECK(seq.settings.sequential.cap == 12);
  const std::string seq_text = format_sequential_plan(seq.settings.sequential, 1, 0.013, 0.01, 2000);
  INFO(seq_text);
  static const std::regex rates(R"(no effect: a false better/worse verdict in ([0-9.]+)% of studies)");
  std::smatch rm;
  REQUIRE(std::regex_search(seq_text, rm, rates));
  CHECK(std::stod(rm[1].str()) <= 5.0 + 2 * 100 * std::sqrt(0.05 * 0.95 / 2000));  // within MC noise of 2,000
  CHECK_THAT(seq_text, Catch::Contains("looks at 3, 6, 9, 12 seed pairs") && Catch::Contains("fixed design of that power"));
  CHECK(plan_from_yaml(plan_to_yaml_file(seq, dir.file("seq-plan.yaml"))).settings.sequential.step == 3);
  write_file(dir.file("badseq.yaml"), base + "sweep:\n  sequential: {first: 1, step: 3, cap: 12}\n  grid:\n    schedule.heads: [[2, 4]]\n");
  CHECK_THROWS_WITH(plan_sweep(dir.file("badseq.yaml")), Catch::Contains("sweep.sequential.first >= 2"));

  // An sd without its source is refused, naming the key.
  write_file(dir.file("bad.yaml"), base + "sweep:\n  power: {sd: 0.01}\n  grid:\n    schedule.heads: [[2, 4]]\n");
  CHECK_THROWS_WITH(plan_sweep(dir.file("bad.yaml")), Catch::Contains("sweep.power.sd without sweep.power.source"));

  // Measured: a finished pilot of 3 seeds; its sd is the paired sd of its final losses.
  auto r = run_prism(fmt::format("sweep {} --out {}", dir.file("none.yaml"), dir.file("pilot")) +
                     " \"sweep.grid.train.seed=[0,1,2]\"");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const SweepPlan pilot = plan_from_yaml(dir.file("pilot/sweep.yaml"));
  std::map<std::string, std::map<uint64_t, double>> loss;
  for (const auto& o : collect_outcomes(pilot, dir.file("pilot"), {})) loss[o.trial->group][o.trial->seed] = o.final_val;
  std::string uniform;
  for (const auto& t : pilot.trials)
    if (t.baseline) uniform = t.group;
  std::vector<double> d;
  for (const auto& t : pilot.trials)
    if (!t.baseline) d.push_back(loss[t.group][t.seed] - loss[uniform][t.seed]);
  REQUIRE(d.size() == 3);
  const PairedSd p = pilot_paired_sd(dir.file("pilot"));
  CHECK(p.comparisons == 1);
  CHECK(p.pairs == 3);
  CHECK(p.sd == Approx(sample_sd(d)).epsilon(1e-12));
  const std::string measured = format_power_plan(stated, dir.file("pilot"));
  CHECK_THAT(measured, Catch::Contains(fmt::format("{:.4f} nats, measured in the pilot {} (1 comparison, 3 pairs", p.sd,
                                                   dir.file("pilot"))));
  CHECK_THROWS_WITH(pilot_paired_sd(dir.path()), Catch::Contains("not a sweep directory"));
}
