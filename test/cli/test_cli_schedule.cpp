// The prism binary end to end: exit codes and messages of `prism schedule`.
#include <catch2/catch.hpp>

#include "support.h"

using prism::test::run_prism;

TEST_CASE("prism with no or an unknown command explains itself", "[cli]") {
  auto none = run_prism("");
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Catch::Contains("schedule"));
  auto bad = run_prism("frobnicate");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("unknown command 'frobnicate'"));
  CHECK(run_prism("schedule --help").exit_code == 0);
}

TEST_CASE("schedule inspect shows equal parameters for uniform and Prism on the paper shapes", "[cli]") {
  for (auto [model, heads, params] : {std::tuple{"gpt2-124m", "3x3,6x3,12x6", "124,439,808"},
                                      std::tuple{"gpt2-354m", "4x4,8x4,16x16", "354,823,168"},
                                      std::tuple{"prism-757m", "6x4,12x4,24x16", "758,727,168"}}) {
    INFO(model);
    auto r = run_prism(std::string("schedule inspect --model ") + model + " --heads " + heads);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains(std::string(params) + "      " + params + "  equal"));
    CHECK_THAT(r.output, Catch::Contains("valid: satisfies all six rules"));
  }
}

TEST_CASE("schedule check: exit 1 and the rule for invalid, 0 with warnings for guidelines", "[cli]") {
  auto bad = run_prism("schedule check --model gpt2-124m --heads 6x3,3x3,12x6");
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.output, Catch::Contains("rule 2") && Catch::Contains("Fix:"));
  auto warn = run_prism("schedule check --model gpt2-124m --heads 3,6x3,12x8");
  CHECK(warn.exit_code == 0);
  CHECK_THAT(warn.output, Catch::Contains("warning: rule 4"));
  auto strict = run_prism("schedule check --model gpt2-124m --heads 3,6x3,12x8 --strict");
  CHECK(strict.exit_code == 1);
}

TEST_CASE("schedule enumerate prints the count and the schedules", "[cli]") {
  auto r = run_prism("schedule enumerate --model gpt2-124m --head-dims 256,128");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("13 schedules") && Catch::Contains("3x3,6x3,12x6"));
  auto list = run_prism("schedule enumerate --model gpt2-124m --format list --no-uniform");
  CHECK(list.exit_code == 0);
  CHECK(std::count(list.output.begin(), list.output.end(), '\n') == 12);
}

TEST_CASE("bad input to prism schedule: one clear line, non-zero exit", "[cli]") {
  prism::test::TempDir dir;
  prism::test::write_file(dir.file("bad.yaml"), "model: {preset: gpt2-124m\n");
  prism::test::write_file(dir.file("typo.yaml"), "model: {preset: gpt2-124m, n_layers: 3}\n");
  struct Case {
    std::string args, expect;
  };
  for (const auto& c : {Case{"schedule inspect --config " + dir.file("bad.yaml"), "YAML syntax"},
                        Case{"schedule inspect --config " + dir.file("typo.yaml"), "unknown key 'model.n_layers'"},
                        Case{"schedule inspect --config " + dir.file("none.yaml"), "cannot open"},
                        Case{"schedule inspect --model gpt2-124m --heads 3x3,6x3,12x5", "11 layers"},
                        Case{"schedule", "no action"},
                        Case{"schedule inspect", "no model given"},
                        Case{"schedule inspect --model nope", "unknown model preset"},
                        Case{"schedule inspect --model gpt2-124m --bogus", "unrecognised option"},
                        Case{"schedule enumerate --model gpt2-124m --head-dims 256,abc", "abc"}}) {
    INFO(c.args);
    auto r = run_prism(c.args);
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains(c.expect));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
}
