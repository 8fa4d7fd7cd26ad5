#include <catch2/catch.hpp>

#include "prism/config/config.h"
#include "prism/error.h"
#include "support.h"

using namespace prism;

namespace {
Config parse(const std::string& yaml) { return parse_config(YAML::Load(yaml), "test.yaml"); }
std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("a preset fills the model and keys override it", "[config]") {
  auto c = parse("model: {preset: gpt2-124m, dropout: 0.1}\n");
  CHECK(c.model.n_layer == 12);
  CHECK(c.model.d_model == 768);
  CHECK(c.model.dropout == 0.1);
  CHECK(c.schedule == HeadSchedule::uniform(12, 12));  // no schedule: the uniform baseline
  auto d = parse("model: {preset: cpu-128, n_layer: 8}\n");
  CHECK(d.model.n_layer == 8);
  CHECK(d.model.d_model == 128);
}

TEST_CASE("every schedule form resolves through the config", "[config]") {
  const std::string m = "model: {preset: gpt2-124m}\n";
  auto want = HeadSchedule::parse("3x3,6x3,12x6");
  CHECK(parse(m + "schedule: {heads: [3,3,3,6,6,6,12,12,12,12,12,12]}").schedule == want);
  CHECK(parse(m + "schedule: {heads: \"3x3,6x3,12x6\"}").schedule == want);
  CHECK(parse(m + "schedule: {staircase: [[256,3],[128,3],[64,6]]}").schedule == want);
  CHECK(parse(m + "schedule: {staircase: \"256:3,128:3,64:6\"}").schedule == want);
  CHECK(parse(m + "schedule: {uniform: 12}").schedule == HeadSchedule::uniform(12, 12));
}

TEST_CASE("unknown keys are errors that name the file, the key and the known keys", "[config]") {
  auto e = error_of("model: {preset: gpt2-124m, d_modle: 512}\n");
  CHECK_THAT(e, Catch::Contains("test.yaml") && Catch::Contains("model.d_modle") && Catch::Contains("d_model"));
  CHECK_THAT(error_of("modle: {}\n"), Catch::Contains("unknown key 'modle'"));
  CHECK_THAT(error_of("model: {preset: gpt2-124m}\nschedule: {hedas: [1]}\n"), Catch::Contains("schedule.hedas"));
}

TEST_CASE("wrong types and out-of-range values are errors naming the key", "[config]") {
  CHECK_THAT(error_of("model: {preset: gpt2-124m, n_layer: twelve}"),
             Catch::Contains("model.n_layer") && Catch::Contains("integer") && Catch::Contains("twelve"));
  CHECK_THAT(error_of("model: {preset: gpt2-124m, n_layer: 0}"), Catch::Contains("out of range"));
  CHECK_THAT(error_of("model: {preset: gpt2-124m, dropout: 1.5}"), Catch::Contains("model.dropout"));
  CHECK_THAT(error_of("model: {preset: gpt2-124m, bias: maybe}"), Catch::Contains("true or false"));
  CHECK_THAT(error_of("model: {preset: gpt2-999m}"), Catch::Contains("gpt2-124m"));  // lists known presets
  CHECK_THAT(error_of("model: {preset: gpt2-124m, n_head: 7}"), Catch::Contains("does not divide"));
  CHECK_THAT(error_of("model: [1, 2]"), Catch::Contains("mapping"));
  CHECK_THAT(error_of("model: {preset: gpt2-124m}\nattention: {backend: magic}"), Catch::Contains("sdpa"));
}

TEST_CASE("invalid schedules in a config are errors naming the rule and layer", "[config]") {
  const std::string m = "model: {preset: gpt2-124m}\n";
  CHECK_THAT(error_of(m + "schedule: {heads: \"6x3,3x3,12x6\"}"), Catch::Contains("rule 2") && Catch::Contains("layer 3"));
  CHECK_THAT(error_of(m + "schedule: {heads: \"3x3,6x3,12x5\"}"), Catch::Contains("11 layers"));
  CHECK_THAT(error_of(m + "schedule: {heads: [3, x]}"), Catch::Contains("integers"));
  CHECK_THAT(error_of(m + "schedule: {heads: \"3x3,6x3,12x6\", uniform: 12}"), Catch::Contains("more than one"));
  CHECK_THAT(error_of(m + "schedule: {staircase: [[100,3],[64,9]]}"), Catch::Contains("100"));
  // Guidelines warn, unless strict.
  auto c = parse(m + "schedule: {heads: \"3,6x3,12x8\"}");
  REQUIRE(c.schedule_warnings.size() == 1);
  CHECK(c.schedule_warnings[0].rule == Rule::StaircaseSmoothness);
  CHECK_THAT(error_of(m + "schedule: {heads: \"3,6x3,12x8\", strict: true}"), Catch::Contains("rule 4"));
}

TEST_CASE("key=value overrides use YAML values and win over the file", "[config]") {
  YAML::Node root = YAML::Load("model: {preset: gpt2-124m}\n");
  apply_override(root, "model.dropout=0.2");
  apply_override(root, "schedule.heads=[3,3,3,6,6,6,12,12,12,12,12,12]");
  apply_override(root, "attention.backend=reference");
  auto c = parse_config(root, "x");
  CHECK(c.model.dropout == 0.2);
  CHECK(c.schedule == HeadSchedule::parse("3x3,6x3,12x6"));
  CHECK(c.attention.backend == "reference");
  CHECK_THROWS_WITH(apply_override(root, "novalue"), Catch::Contains("key.path=value"));
  CHECK_THROWS_WITH(apply_override(root, "a..b=1"), Catch::Contains("empty key"));
}

TEST_CASE("malformed YAML names the file and line", "[config]") {
  test::TempDir dir;
  test::write_file(dir.file("bad.yaml"), "model:\n  preset: gpt2-124m\n  n_layer: [1, 2\n");
  CHECK_THROWS_WITH(load_config(dir.file("bad.yaml")), Catch::Contains("bad.yaml:") && Catch::Contains("YAML syntax"));
  CHECK_THROWS_WITH(load_config(dir.file("missing.yaml")), Catch::Contains("cannot open"));
}

TEST_CASE("to_yaml writes a config that parses back to the same run", "[config]") {
  auto c = parse("model: {preset: cpu-128, dropout: 0.1}\nschedule: {heads: \"1x2,4x4\"}\n");
  auto again = parse(to_yaml(c));
  CHECK(again.schedule == c.schedule);
  CHECK(again.model.d_model == c.model.d_model);
  CHECK(again.model.dropout == c.model.dropout);
  CHECK(again.model.preset == "cpu-128");
}

TEST_CASE("model.position and rope_theta: read, checked, and written only for rotary models", "[config][rope]") {
  auto learned = parse("model: {preset: cpu-128}\n");
  CHECK(learned.model.position == Positions::Learned);
  // A learned-position config reads as it did before positions had a choice (sweep directories compare the text).
  CHECK(to_yaml(learned).find("position") == std::string::npos);
  auto rope = parse("model: {preset: cpu-128, position: rope, rope_theta: 500000}\n");
  CHECK(rope.model.position == Positions::Rope);
  CHECK(rope.model.rope_theta == 500000.0);
  auto again = parse(to_yaml(rope));
  CHECK(again.model.position == Positions::Rope);
  CHECK(again.model.rope_theta == 500000.0);
  CHECK(parse("model: {preset: cpu-128, position: rope}\n").model.rope_theta == 10000.0);
  CHECK_THAT(error_of("model: {preset: cpu-128, position: alibi}\n"),
             Catch::Contains("model.position") && Catch::Contains("learned, rope"));
  CHECK_THAT(error_of("model: {preset: cpu-128, position: rope, rope_theta: 0}\n"), Catch::Contains("rope_theta"));
  // Rotary positions turn pairs: a head width of 1 (d_model 128, 128 heads) is refused, naming the layer.
  CHECK_THAT(error_of("model: {preset: cpu-128, n_head: 128, position: rope}\nschedule: {heads: [128,128,128,128,128,128]}\n"),
             Catch::Contains("layer 0 has 128 heads of width 1") && Catch::Contains("model.position: learned"));
}
