// Config composition (compose.h): defaults lists, packages, overrides,
// interpolation, and errors that name the file and the key.
#include <catch2/catch.hpp>

#include <filesystem>

#include "prism/config/compose.h"
#include "prism/config/config.h"
#include "prism/error.h"
#include "support.h"

using namespace prism;
using prism::test::TempDir;
using prism::test::write_file;
namespace fs = std::filesystem;

namespace {

// A config tree like experiments/: groups model/, train/, schedule/ and a primary file.
struct Tree {
  TempDir dir{"prism-compose"};
  Tree() {
    for (const char* g : {"model", "train", "schedule", "data"}) fs::create_directories(dir.file(g));
    write_file(dir.file("model/tiny.yaml"), "preset: test-tiny\nvocab_size: 50257\n");
    write_file(dir.file("model/deep.yaml"), "# A comment first\n# @package _global_\nmodel:\n  preset: test-tiny\n  n_layer: 4\n");
    write_file(dir.file("train/quick.yaml"), "max_steps: 5\nlr: 1.0e-3\nseq_len: 16\n");
    write_file(dir.file("train/long.yaml"), "max_steps: 500\nlr: 2.0e-4\n");
    write_file(dir.file("schedule/narrow.yaml"), "heads: [2, 4]\n");
    write_file(dir.file("data/synth.yaml"), "dir: /data/synth\n");
  }
  std::string write(const std::string& name, const std::string& text) {
    write_file(dir.file(name), text);
    return dir.file(name);
  }
};

std::string compose_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    compose_config(path, overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string load_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    load_config(path, overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("defaults choose group options, later entries win, then the file's own keys", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml",
                   "defaults:\n  - model: tiny\n  - train: quick\n  - train@data: long\n"
                   "train:\n  lr: 3.0e-3\n");
  auto c = compose_config(p);
  CHECK(c.root["model"]["preset"].as<std::string>() == "test-tiny");
  CHECK(c.root["train"]["max_steps"].as<int>() == 5);       // from train/quick.yaml
  CHECK(c.root["train"]["lr"].as<double>() == 3.0e-3);       // the file's own key wins
  CHECK(c.root["data"]["max_steps"].as<int>() == 500);       // `train@data` merged at data
  REQUIRE(c.groups.size() == 3);
  CHECK(c.groups[0].group == "model");
  CHECK(c.groups[0].option == "tiny");
  CHECK(c.groups[2].package == "data");
  // Every key knows its file and line.
  CHECK_THAT(c.origins->at("train.max_steps"), Catch::EndsWith("train/quick.yaml:1"));
  CHECK_THAT(c.origins->at("train.lr"), Catch::EndsWith("exp.yaml:6"));
  CHECK_FALSE(c.root["defaults"].IsDefined());
}

TEST_CASE("_self_ placed first lets the defaults override the file's own keys", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml", "defaults:\n  - _self_\n  - train: quick\ntrain:\n  lr: 3.0e-3\n  max_steps: 9\n");
  auto c = compose_config(p);
  CHECK(c.root["train"]["lr"].as<double>() == 1.0e-3);  // train/quick.yaml came after _self_
  CHECK(c.root["train"]["max_steps"].as<int>() == 5);
}

TEST_CASE("packages: a group option merges at its group, _global_ at the root", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml", "defaults:\n  - model: deep\n  - schedule: narrow\n");
  auto c = compose_config(p);
  CHECK(c.root["model"]["n_layer"].as<int>() == 4);  // `# @package _global_` after a comment line
  CHECK(c.root["schedule"]["heads"].size() == 2);    // default package: schedule
  CHECK(c.groups[0].package == "");
  CHECK(c.groups[1].package == "schedule");
  t.write("train/odd.yaml", "# @package train.extra\nsteps: 3\n");
  auto q = t.write("exp2.yaml", "defaults:\n  - train: odd\n");
  CHECK(compose_config(q).root["train"]["extra"]["steps"].as<int>() == 3);
}

TEST_CASE("key overrides: key=value wins, +key adds, ++key sets, ~key removes", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml", "defaults:\n  - model: tiny\n  - train: quick\n");
  auto c = compose_config(p, {"train.lr=5e-4", "+train.warmup_steps=2", "++train.max_steps=7", "~model.vocab_size",
                              "schedule.heads=[1,2]"});
  CHECK(c.root["train"]["lr"].as<double>() == 5e-4);
  CHECK(c.root["train"]["warmup_steps"].as<int>() == 2);
  CHECK(c.root["train"]["max_steps"].as<int>() == 7);
  CHECK_FALSE(c.root["model"]["vocab_size"].IsDefined());
  CHECK(c.root["schedule"]["heads"][1].as<int>() == 2);
  CHECK_THAT(c.origins->at("train.lr"), Catch::Contains("command line override 'train.lr=5e-4'"));

  // The typed config reads them: an override of a key nobody knows names the override.
  auto cfg = load_config(p, {"train.lr=5e-4", "schedule.heads=[2,4]"});
  CHECK(cfg.train.lr == 5e-4);
  CHECK(cfg.schedule.heads() == std::vector<int>{2, 4});
  CHECK_THAT(load_error(p, {"train.lrr=1"}),
             Catch::Contains("command line override 'train.lrr=1'") && Catch::Contains("unknown key 'train.lrr'"));
  CHECK_THAT(load_error(p, {"train.lr=fast"}), Catch::Contains("train.lr") && Catch::Contains("must be a number"));
}

TEST_CASE("group overrides: group=option swaps, +group adds, ~group drops", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml", "defaults:\n  - model: tiny\n  - train: quick\n  - data: null\n");
  auto swapped = compose_config(p, {"train=long"});
  CHECK(swapped.root["train"]["max_steps"].as<int>() == 500);
  CHECK_FALSE(swapped.root["train"]["seq_len"].IsDefined());  // quick.yaml is not merged at all
  auto filled = compose_config(p, {"data=synth"});              // `data: null` reserves the slot
  CHECK(filled.root["data"]["dir"].as<std::string>() == "/data/synth");
  auto added = compose_config(p, {"+schedule=narrow"});
  CHECK(added.root["schedule"]["heads"].size() == 2);
  CHECK(added.groups.back().group == "schedule");
  auto dropped = compose_config(p, {"~train"});
  CHECK_FALSE(dropped.root["train"].IsDefined());
  // A group and a key of that group are different overrides, both fine together.
  auto both = compose_config(p, {"train=long", "train.lr=1e-2"});
  CHECK(both.root["train"]["lr"].as<double>() == 1e-2);
}

TEST_CASE("conflicting and impossible overrides are errors that say how to fix them", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml", "defaults:\n  - model: tiny\n  - train: quick\n");
  CHECK_THAT(compose_error(p, {"train.lr=1e-3", "train.lr=2e-3"}),
             Catch::Contains("conflicting overrides") && Catch::Contains("train.lr"));
  CHECK_THAT(compose_error(p, {"train={max_steps: 3}", "train.max_steps=4"}), Catch::Contains("conflicting"));
  CHECK_THAT(compose_error(p, {"train=quick", "train=long"}), Catch::Contains("config group train"));
  CHECK_THAT(compose_error(p, {"+train.lr=1"}),
             Catch::Contains("already set") && Catch::Contains("train/quick.yaml:2") && Catch::Contains("without '+'"));
  CHECK_THAT(compose_error(p, {"~train.warmup_steps"}), Catch::Contains("not set"));
  CHECK_THAT(compose_error(p, {"~model.preset=cpu-128"}), Catch::Contains("its value is test-tiny"));
  CHECK_THAT(compose_error(p, {"schedule=narrow"}),
             Catch::Contains("not in the defaults list") && Catch::Contains("+schedule=narrow"));
  CHECK_THAT(compose_error(p, {"+model=tiny"}), Catch::Contains("already chosen"));
  CHECK_THAT(compose_error(p, {"train.lr"}), Catch::Contains("no '=value'"));
  CHECK_THAT(compose_error(p, {"train..lr=1"}), Catch::Contains("empty key part"));
  CHECK_THAT(compose_error(p, {"model.preset.x=1"}), Catch::Contains("'model.preset' is 'test-tiny', not a mapping"));
}

TEST_CASE("missing groups and options name the defaults entry and list what exists", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml", "defaults:\n  - model: tiny\n  - modle: tiny\n");
  CHECK_THAT(compose_error(p), Catch::Contains("no config group 'modle'") && Catch::Contains("exp.yaml:3") &&
                                   Catch::Contains("model, schedule"));
  auto q = t.write("exp2.yaml", "defaults:\n  - model: huge\n");
  CHECK_THAT(compose_error(q), Catch::Contains("no option 'huge'") && Catch::Contains("exp2.yaml:2") &&
                                   Catch::Contains("use one of: deep, tiny"));
  CHECK_THAT(compose_error(q, {"model=tiny", "train=nope"}), Catch::Contains("not in the defaults list"));
  auto r = t.write("exp3.yaml", "defaults:\n  - model: tiny\n  - model: deep\n");
  CHECK_THAT(compose_error(r), Catch::Contains("chosen twice") && Catch::Contains("override model"));
  auto s = t.write("exp4.yaml", "defaults: {model: tiny}\n");
  CHECK_THAT(compose_error(s), Catch::Contains("'defaults' must be a list"));
  CHECK_THAT(compose_error(t.dir.file("missing.yaml")), Catch::Contains("cannot open config file"));
}

TEST_CASE("unknown keys and type errors inside a group file name that file and line", "[config][compose]") {
  Tree t;
  t.write("train/typo.yaml", "max_steps: 5\nlearning_rate: 1.0e-3\n");
  t.write("train/bad-type.yaml", "max_steps: many\n");
  auto p = t.write("exp.yaml", "defaults:\n  - model: tiny\n  - train: typo\n");
  CHECK_THAT(load_error(p), Catch::Contains("train/typo.yaml:2") && Catch::Contains("unknown key 'train.learning_rate'"));
  CHECK_THAT(load_error(p, {"train=bad-type"}),
             Catch::Contains("train/bad-type.yaml:1") && Catch::Contains("train.max_steps") &&
                 Catch::Contains("integer"));
  // Two schedule forms from two places: both named.
  t.write("schedule/stairs.yaml", "staircase: [[32, 1]]\n");
  auto q = t.write("exp2.yaml", "defaults:\n  - model: tiny\n  - schedule: stairs\n");
  CHECK_THAT(load_error(q, {"schedule.heads=[2,4]"}),
             Catch::Contains("schedule/stairs.yaml:1") && Catch::Contains("command line override") &&
                 Catch::Contains("~schedule.staircase"));
  CHECK(load_config(q, {"schedule.heads=[2,4]", "~schedule.staircase", "train.seq_len=16"}).schedule.heads() ==
        std::vector<int>{2, 4});
}

TEST_CASE("${a.b} interpolation copies values, splices text, and runs after overrides", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml",
                   "defaults:\n  - train: quick\n"
                   "base_heads: [2, 4]\n"
                   "schedule: {heads: '${base_heads}'}\n"
                   "name: 'run-${train.max_steps}-steps'\n"
                   "literal: '\\${not.a.ref}'\n"
                   "chain: '${name}'\n");
  auto c = compose_config(p, {"train.max_steps=8"});
  REQUIRE(c.root["schedule"]["heads"].IsSequence());  // whole-value reference keeps the type
  CHECK(c.root["schedule"]["heads"][1].as<int>() == 4);
  CHECK(c.root["name"].as<std::string>() == "run-8-steps");  // sees the override
  CHECK(c.root["literal"].as<std::string>() == "${not.a.ref}");
  CHECK(c.root["chain"].as<std::string>() == "run-8-steps");

  auto missing = t.write("bad1.yaml", "a: '${b.c}'\n");
  CHECK_THAT(compose_error(missing), Catch::Contains("${b.c}") && Catch::Contains("bad1.yaml:1") &&
                                         Catch::Contains("not set"));
  auto cycle = t.write("bad2.yaml", "a: '${b}'\nb: '${a}'\n");
  CHECK_THAT(compose_error(cycle), Catch::Contains("refers back to itself") || Catch::Contains("cycle"));
  auto splice = t.write("bad3.yaml", "a: [1]\nb: 'x${a}'\n");
  CHECK_THAT(compose_error(splice), Catch::Contains("single value"));
  // Unresolved on request (sweeps resolve after their own overrides).
  ComposeOptions keep;
  keep.resolve = false;
  CHECK(compose_config(p, std::vector<std::string>{}, keep).root["name"].as<std::string>() ==
        "run-${train.max_steps}-steps");
}

TEST_CASE("nested defaults: relative groups, included files and override entries", "[config][compose]") {
  Tree t;
  fs::create_directories(t.dir.file("train/optim"));
  t.write("train/optim/adam.yaml", "beta2: 0.99\n");
  t.write("train/tuned.yaml", "defaults:\n  - optim@_global_: adam\n  - /data: synth\nmax_steps: 11\n");
  t.write("base.yaml", "defaults:\n  - model: tiny\nschedule: {heads: [2, 4]}\n");
  auto p = t.write("exp.yaml", "defaults:\n  - base\n  - train: tuned\n");
  auto c = compose_config(p);
  CHECK(c.root["beta2"].as<double>() == 0.99);  // train/optim/adam.yaml, package forced to the root
  CHECK(c.root["data"]["dir"].as<std::string>() == "/data/synth");
  CHECK(c.root["train"]["max_steps"].as<int>() == 11);
  CHECK(c.root["model"]["preset"].as<std::string>() == "test-tiny");  // through base.yaml
  CHECK(c.files.size() == 6);
  t.write("data/other.yaml", "dir: /data/other\n");
  auto q = t.write("exp2.yaml", "defaults:\n  - train: tuned\n  - override data: other\n");
  CHECK(compose_config(q).root["data"]["dir"].as<std::string>() == "/data/other");
  CHECK(compose_config(q, {"data=synth"}).root["data"]["dir"].as<std::string>() == "/data/synth");
  auto self = t.write("loop.yaml", "defaults:\n  - loop\n");
  CHECK_THAT(compose_error(self), Catch::Contains("nest more than 32 deep"));
}

TEST_CASE("groups are found from a parent directory and from PRISM_CONFIG_PATH", "[config][compose]") {
  Tree t;
  fs::create_directories(t.dir.file("sweeps"));
  auto p = t.write("sweeps/exp.yaml", "defaults:\n  - model: tiny\n");
  CHECK(compose_config(p).root["model"]["preset"].as<std::string>() == "test-tiny");
  TempDir elsewhere("prism-compose-elsewhere");
  write_file(elsewhere.file("exp.yaml"), "defaults:\n  - train: long\n");
  CHECK_THAT(compose_error(elsewhere.file("exp.yaml")), Catch::Contains("no config group 'train'"));
  ComposeOptions o;
  o.search_path = {t.dir.path()};
  CHECK(compose_config(elsewhere.file("exp.yaml"), std::vector<std::string>{}, o).root["train"]["lr"].as<double>() ==
        2.0e-4);
}

TEST_CASE("the resolved config round-trips through to_yaml and load_config", "[config][compose]") {
  Tree t;
  auto p = t.write("exp.yaml", "defaults:\n  - model: deep\n  - train: quick\n  - data: synth\nschedule: {heads: '2x2,4x2'}\n");
  auto c = load_config(p, {"train.seed=7"});
  CHECK(c.model.n_layer == 4);
  CHECK(c.train.seed == 7);
  auto saved = t.write("resolved.yaml", to_yaml(c));
  auto again = load_config(saved);
  CHECK(to_yaml(again) == to_yaml(c));
  CHECK(again.schedule == c.schedule);
}

TEST_CASE("prism train --print-config shows the composed config with its overrides", "[config][compose][cli]") {
  auto r = prism::test::run_prism(
      "train " + prism::test::source_path("experiments/cpu-prism.yaml") + " attention=sdpa train.lr=1.0e-3 --print-config");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("backend: sdpa") && Catch::Contains("lr: 0.001") &&
                           Catch::Contains("heads: [1, 1, 4, 4, 4, 4]") && Catch::Contains("dir: data/cache/austen"));
  auto bad = prism::test::run_prism("train " + prism::test::source_path("experiments/cpu-prism.yaml") +
                                    " attention=magic --print-config");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("no option 'magic'") && Catch::Contains("auto, cuda, fused, reference, sdpa"));
}
