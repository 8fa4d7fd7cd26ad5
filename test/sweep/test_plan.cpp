// Sweep expansion (plan.h): the grid, schedule generators, the baseline, trial
// names, sweep.yaml, and the bad inputs that must fail before anything runs.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "prism/config/compose.h"
#include "prism/config/config.h"
#include "prism/error.h"
#include "prism/schedule/enumerate.h"
#include "prism/sweep/plan.h"
#include "sweep/sweep_support.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

struct Files {
  TempDir dir{"prism-plan"};
  std::string write(const std::string& name, const std::string& sweep) {
    write_file(dir.file(name), tiny_base("/no/data") + sweep);
    return dir.file(name);
  }
};

std::vector<std::string> names(const SweepPlan& p) {
  std::vector<std::string> out;
  for (const auto& t : p.trials) out.push_back(t.name);
  return out;
}

std::string plan_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    plan_sweep(path, overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a grid expands to every combination, schedule outermost, baseline first", "[sweep][plan]") {
  Files f;
  auto p = plan_sweep(f.write("s.yaml", "sweep:\n  grid:\n    schedule.heads: [[2, 2, 4, 4], \"1x2,4x2\"]\n"
                                        "    train.lr: [1.0e-3, 3.0e-3]\n    train.seed: [0, 1, 2]\n"));
  REQUIRE(p.trials.size() == 3 * 2 * 3);  // (uniform + 2 schedules) x 2 lr x 3 seeds
  CHECK(p.axes == std::vector<std::string>{"schedule", "train.lr", "train.seed"});
  CHECK(p.trials[0].name == "h4x4_lr1.0e-3_seed0");
  CHECK(p.trials[0].baseline);
  CHECK(p.trials[1].name == "h4x4_lr1.0e-3_seed1");
  CHECK(p.trials[3].name == "h4x4_lr3.0e-3_seed0");
  CHECK(p.trials[6].name == "h2x2-4x2_lr1.0e-3_seed0");
  CHECK(p.trials[17].name == "h1x2-4x2_lr3.0e-3_seed2");
  CHECK(p.trials[17].group == "h1x2-4x2_lr3.0e-3");  // the configuration across seeds
  CHECK(p.trials[17].seed == 2);
  CHECK(p.trials[17].schedule == HeadSchedule::parse("1x2,4x2"));
  CHECK(p.trials[17].index == 17);
  // Each trial's config is the resolved config with its values.
  auto cfg = parse_config(YAML::Load(p.trials[17].config), "trial");
  CHECK(cfg.train.lr == 3.0e-3);
  CHECK(cfg.train.seed == 2);
  CHECK(cfg.schedule.heads() == std::vector<int>{1, 1, 4, 4});
  CHECK(p.trials[17].params == std::vector<std::pair<std::string, std::string>>{{"train.lr", "3.0e-3"},
                                                                                  {"train.seed", "2"}});
  CHECK(p.trials[0].step_tokens == 2 * 16);
}

TEST_CASE("schedule.enumerate expands through the enumerator, the baseline is added once", "[sweep][plan]") {
  Files f;
  auto p = plan_sweep(f.write("s.yaml", "sweep:\n  grid:\n    schedule.enumerate: {head_dims: [32], block: [2, 2]}\n"
                                        "    schedule.heads: [[4, 4, 4, 4], [2, 2, 4, 4]]\n"));
  EnumerationSpace sp;
  sp.n_layer = 4;
  sp.d_model = 64;
  sp.h_base = 4;
  sp.head_dims = {32};
  sp.rules.block_min = sp.rules.block_max = 2;
  sp.include_uniform = false;
  const auto expected = enumerate_schedules(sp);  // [2, 2, 4, 4] only
  REQUIRE(expected.size() == 1);
  // uniform (baseline), then the explicit list (its uniform and its [2,2,4,4] are duplicates), then enumerated.
  REQUIRE(p.trials.size() == 2);
  CHECK(p.trials[0].baseline);
  CHECK(p.trials[1].schedule == expected[0]);

  auto no_base = plan_sweep(f.write("n.yaml", "sweep:\n  baseline: false\n  grid:\n    schedule.heads: [\"2x2,4x2\"]\n"));
  CHECK(names(no_base) == std::vector<std::string>{"h2x2-4x2"});
  auto plain = plan_sweep(f.write("p.yaml", "schedule: {heads: [2, 2, 4, 4]}\nsweep:\n  grid: {train.seed: [0, 1]}\n"));
  CHECK(names(plain) == std::vector<std::string>{"h4x4_seed0", "h4x4_seed1", "h2x2-4x2_seed0", "h2x2-4x2_seed1"});
}

TEST_CASE("config group options are an axis, schedules follow each model", "[sweep][plan]") {
  Files f;
  fs::create_directories(f.dir.file("model"));
  write_file(f.dir.file("model/narrow.yaml"), "preset: test-tiny\nvocab_size: 50257\nn_layer: 4\n");
  write_file(f.dir.file("model/wide.yaml"), "preset: test-tiny\nvocab_size: 50257\nn_layer: 4\nd_model: 128\nn_head: 8\n");
  write_file(f.dir.file("g.yaml"),
             "defaults:\n  - model: narrow\n  - _self_\n" + tiny_base("/no/data").substr(tiny_base("/no/data").find("train:")) +
                 "sweep:\n  grid:\n    model: [narrow, wide]\n    schedule.enumerate: {block: [2, 2]}\n"
                 "    train: {seed: [5]}\n");
  auto p = plan_sweep(f.dir.file("g.yaml"));
  CHECK(p.axes == std::vector<std::string>{"model", "schedule", "train.seed"});
  // narrow: d_h 16, wide widths 32, 64 -> uniform + {2x2}, {1x2}; wide: d_h 16, widths 32, 64 -> 8 heads base.
  REQUIRE(p.trials.size() >= 4);
  CHECK(p.trials[0].name == "narrow_h4x4_seed5");
  CHECK(p.trials[0].baseline);
  bool wide_baseline = false;
  for (const auto& t : p.trials)
    if (t.name == "wide_h8x4_seed5") wide_baseline = t.baseline;
  CHECK(wide_baseline);
  CHECK(p.trials.back().name.rfind("wide_", 0) == 0);  // the model axis is outermost
  CHECK(p.trials[0].params[0] == std::make_pair(std::string("model"), std::string("narrow")));
}

TEST_CASE("sweep.yaml round-trips the plan, its definition ignores how it runs", "[sweep][plan]") {
  Files f;
  auto path = f.write("s.yaml", "sweep:\n  name: rt\n  jobs: 3\n  halving: {eta: 2, min_steps: 2}\n"
                                "  slurm: {partition: cpu, extra: [\"--qos=low\"]}\n"
                                "  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n    train.seed: [0, 1]\n");
  auto p = plan_sweep(path);
  CHECK(p.settings.halving.enabled);
  CHECK(p.settings.slurm.extra == std::vector<std::string>{"--qos=low"});
  write_file(f.dir.file("sweep.yaml"), plan_to_yaml(p));
  auto back = plan_from_yaml(f.dir.file("sweep.yaml"));
  CHECK(back.definition() == p.definition());
  CHECK(names(back) == names(p));
  CHECK(back.settings.jobs == 3);
  CHECK(back.settings.slurm.partition == "cpu");
  CHECK(back.trials[1].schedule == p.trials[1].schedule);
  auto jobs8 = plan_sweep(path, {"sweep.jobs=8"});
  CHECK(jobs8.definition() == p.definition());
  auto other = plan_sweep(path, {"train.lr=1.0e-3"});
  CHECK(other.definition() != p.definition());
}

TEST_CASE("sweep.yaml of an older prism reads with today's defaults for the keys it lacks", "[sweep][plan]") {
  Files f;
  auto p = plan_sweep(f.write("s.yaml", "sweep:\n  name: old\n  grid:\n    train.seed: [0, 1]\n"));
  p.settings.halving.noise_k = 1.5;
  p.settings.slurm.signal_seconds = 300;
  p.settings.power.sd = 0.02;
  const std::string now = plan_to_yaml(p);
  // What sweep.yaml looked like before the noise rule, the time-limit warning, the bookkeeping jobs'
  // resources, the estimate, power and sequential sections.
  YAML::Node old = YAML::Load(now);
  for (const char* k : {"noise_k", "rung_seeds"}) old["settings"]["halving"].remove(k);
  for (const char* k : {"signal_seconds", "max_requeues", "collect"}) old["settings"]["slurm"].remove(k);
  for (const char* k : {"estimate", "power", "sequential"}) old["settings"].remove(k);
  write_file(f.dir.file("old.yaml"), YAML::Dump(old));
  const auto back = plan_from_yaml(f.dir.file("old.yaml"));
  CHECK(back.settings.halving.noise_k == 0.0);  // ranked by the mean alone, as it ran
  CHECK(back.settings.halving.rung_seeds == 0);
  CHECK(back.settings.slurm.signal_seconds == 120);
  CHECK(back.settings.slurm.max_requeues == 50);
  CHECK(back.settings.slurm.collect.time == "00:30:00");
  CHECK(back.settings.power.sd == 0.0);
  CHECK(back.settings.jobs == p.settings.jobs);
  CHECK(names(back) == names(p));
  // The same file as written today keeps every value.
  write_file(f.dir.file("now.yaml"), now);
  const auto same = plan_from_yaml(f.dir.file("now.yaml"));
  CHECK(same.settings.halving.noise_k == 1.5);
  CHECK(same.settings.slurm.signal_seconds == 300);
  CHECK(same.settings.power.sd == 0.02);
  CHECK(plan_to_yaml(same) == now);
  // A key every version wrote is required: without it the file is unreadable, and says how to fix it.
  YAML::Node broken = YAML::Load(now);
  broken["settings"].remove("jobs");
  write_file(f.dir.file("broken.yaml"), YAML::Dump(broken));
  try {
    plan_from_yaml(f.dir.file("broken.yaml"));
    FAIL("a sweep.yaml without settings.jobs was read");
  } catch (const prism::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("sweep.yaml is not readable") && Catch::Contains("--force"));
  }
}

TEST_CASE("bad sweeps fail before anything runs, naming the file and the key", "[sweep][plan]") {
  Files f;
  CHECK_THAT(plan_error(f.write("e.yaml", "sweep:\n  grid:\n    train.seed: []\n")),
             Catch::Contains("search space is empty") && Catch::Contains("e.yaml:9") &&
                 Catch::Contains("sweep.grid.train.seed"));
  CHECK_THAT(plan_error(f.write("bad.yaml", "sweep:\n  grid:\n    schedule.heads: [[4, 2, 4, 4]]\n")),
             Catch::Contains("trial h4-2-4x2") && Catch::Contains("monotonic"));
  CHECK_THAT(plan_error(f.write("div.yaml", "sweep:\n  grid:\n    schedule.heads: [\"3x4\"]\n")),
             Catch::Contains("divide"));
  CHECK_THAT(plan_error(f.write("none.yaml", "sweep:\n  grid:\n    schedule.enumerate: {head_dims: [32], block: [3, 3]}\n"),
                        {"sweep.baseline=false"}),
             Catch::Contains("finds no schedule"));
  CHECK_THAT(plan_error(f.write("c.yaml", "sweep:\n  grid:\n    train.seed: [0, 1]\n"), {"train.seed=3"}),
             Catch::Contains("conflicts with the swept key train.seed"));
  CHECK_THAT(plan_error(f.write("c2.yaml", "sweep:\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n"),
                        {"schedule.heads=[4,4,4,4]"}),
             Catch::Contains("conflicts with the swept schedules"));
  CHECK_THAT(plan_error(f.write("k.yaml", "sweep:\n  grdi: {}\n")),
             Catch::Contains("unknown key 'sweep.grdi'") && Catch::Contains("k.yaml:8"));
  CHECK_THAT(plan_error(f.write("t.yaml", "sweep:\n  grid:\n    train.lr: [1.0e-3, fast]\n")),
             Catch::Contains("trial") && Catch::Contains("train.lr") && Catch::Contains("sweep grid"));
  CHECK_THAT(plan_error(f.write("u.yaml", "sweep:\n  grid:\n    schedule.uniform: [2, 4]\n")),
             Catch::Contains("cannot be swept"));
  CHECK_THAT(plan_error(f.write("h.yaml", "sweep:\n  halving: true\n  grid:\n    train.max_steps: [4, 8]\n")),
             Catch::Contains("one train.max_steps"));
  CHECK_THAT(plan_error(f.write("n.yaml", "sweep:\n  name: a/b\n")), Catch::Contains("plain folder name"));
  CHECK_THAT(plan_error(f.write("no.yaml", "")), Catch::Contains("no `sweep:` section"));
}

TEST_CASE("the shipped experiments compose: every group option, study files and sweeps", "[sweep][plan]") {
  const std::string root = source_path("experiments");
  // Every group option composes into a valid config next to a model.
  for (const char* group : {"model", "schedule", "data", "train", "attention"}) {
    for (const auto& e : fs::directory_iterator(root + "/" + group)) {
      const std::string g = group, option = e.path().stem().string();
      std::string model = "cpu-128";
      if (g == "model") model = option;
      if (g == "schedule" && option.rfind("prism-", 0) == 0)  // the paper's examples, on their models
        model = option == "prism-124m" ? "gpt2-124m" : option == "prism-354m" ? "gpt2-354m" : "prism-757m";
      if (g == "train" && option == "paper") model = "gpt2-124m";
      std::string text = fmt::format("defaults:\n  - model: {}\n", model);
      if (g != "model") text += fmt::format("  - {}: {}\n", g, option);
      if (g != "train") text += "train: {seq_len: 32}\n";
      TempDir t("prism-exp");
      write_file(t.file("x.yaml"), text);
      INFO(g << "/" << option);
      ComposeOptions o;
      o.search_path = {root};
      auto composed = compose(t.file("x.yaml"), {}, o);
      Config c;
      REQUIRE_NOTHROW(c = parse_config(composed.root, t.file("x.yaml"), composed.origins));
      if (g == "model") CHECK(c.model.preset == option);
      if (g == "attention") CHECK(c.attention.backend == option);
      if (g == "train" && option == "smoke") CHECK(c.train.max_steps == 12);
    }
  }
  auto study = load_config(root + "/cpu-prism.yaml");
  CHECK(study.schedule.heads() == std::vector<int>{1, 1, 4, 4, 4, 4});
  CHECK(study.data.dir == "data/cache/austen-bpe");
  CHECK(load_config(root + "/cpu-prism.yaml", {"schedule=uniform"}).schedule.is_uniform());
  CHECK(load_config(root + "/prism-124m.yaml").schedule == HeadSchedule::parse("3x3,6x3,12x6"));
  auto cpu = plan_sweep(root + "/sweeps/cpu-schedules.yaml");
  CHECK(cpu.trials.size() == 10);
  auto smoke = plan_sweep(root + "/sweeps/smoke.yaml");
  CHECK(smoke.trials.size() == 6);
}
