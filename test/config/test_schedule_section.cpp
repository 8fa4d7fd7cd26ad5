// The schedule grammar (schedule_section.h): one parser for a config's
// `schedule:` section and a sweep's schedule axes. Read as a spec: each case
// states one rule of the grammar.
#include <catch2/catch.hpp>

#include "prism/config/config.h"
#include "prism/config/schedule_section.h"
#include "prism/error.h"

using namespace prism;

namespace {

ModelConfig gpt2() { return model_preset("gpt2-124m"); }  // 12 layers, d_model 768, 12 baseline heads

ScheduleSection section(const std::string& yaml, const std::optional<HeadSchedule>& chosen = std::nullopt) {
  return parse_schedule_section(ConfigNode(YAML::Load(yaml), "s.yaml", "schedule"), gpt2(), chosen);
}

std::string section_error(const std::string& yaml, const std::optional<HeadSchedule>& chosen = std::nullopt) {
  try {
    section(yaml, chosen);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

ScheduleRules rules(const std::string& yaml) {
  ConfigNode n(YAML::Load(yaml), "s.yaml", "schedule");
  return parse_schedule_rules(n);
}

EnumerationSpace enumeration(const std::string& yaml) {
  return parse_enumeration_section(ConfigNode(YAML::Load(yaml), "sweep.yaml", "sweep.grid.schedule.enumerate"), gpt2());
}

const HeadSchedule kPaper = HeadSchedule::parse("3x3,6x3,12x6");

}  // namespace

TEST_CASE("schedule grammar: a section gives one form, or none for the uniform baseline", "[config][schedule]") {
  CHECK(section("{heads: [3, 3, 3, 6, 6, 6, 12, 12, 12, 12, 12, 12]}").schedule == kPaper);
  CHECK(section("{heads: \"3x3,6x3,12x6\"}").schedule == kPaper);
  CHECK(section("{uniform: 12}").schedule == HeadSchedule::uniform(12, 12));
  CHECK_THAT(section_error("{uniform: 6}"), Catch::Contains("6x12") && Catch::Contains("rule 3"));  // 6 in every layer
  CHECK(section("{staircase: [[256, 3], [128, 3], [64, 6]]}").schedule == kPaper);
  CHECK(section("{staircase: \"256:3,128:3,64:6\"}").schedule == kPaper);
  CHECK(section("{}").schedule == HeadSchedule::uniform(12, 12));
  CHECK_THAT(section_error("{heads: \"3x3,6x3,12x6\", uniform: 12}"),
             Catch::Contains("more than one form") && Catch::Contains("schedule.heads") &&
                 Catch::Contains("schedule.uniform"));
}

TEST_CASE("schedule grammar: a heads value is a list of counts or a compact form", "[config][schedule]") {
  CHECK(parse_heads(YAML::Load("[1, 1, 4, 4]"), "here") == HeadSchedule({1, 1, 4, 4}));
  CHECK(parse_heads(YAML::Load("1x2,4x2"), "here") == HeadSchedule({1, 1, 4, 4}));
  CHECK(parse_heads(YAML::Load("\"[1x2, 4, 4]\""), "here") == HeadSchedule({1, 1, 4, 4}));
  CHECK_THROWS_WITH(parse_heads(YAML::Load("[1, x]"), "f.yaml key h"),
                    Catch::Contains("integers") && Catch::Contains("f.yaml key h"));
  CHECK_THROWS_WITH(parse_heads(YAML::Load("1y2"), "f.yaml key h"),
                    Catch::Contains("cannot read '1y2'") && Catch::Contains("f.yaml key h"));
  CHECK_THROWS_WITH(parse_heads(YAML::Load("{a: 1}"), "f.yaml key h"), Catch::Contains("list of head counts"));
}

TEST_CASE("schedule grammar: a staircase is [head_dim, layers] pairs or text", "[config][schedule]") {
  const auto stairs = parse_staircase(YAML::Load("\"256:3,64:9\""), "here");
  REQUIRE(stairs.size() == 2);
  CHECK(stairs[1].head_dim == 64);
  CHECK(stairs[1].layers == 9);
  CHECK_THROWS_WITH(parse_staircase(YAML::Load("[[256, 3, 1]]"), "f.yaml"), Catch::Contains("[head_dim, layers]"));
  CHECK_THROWS_WITH(parse_staircase(YAML::Load("\"256-3\""), "f.yaml"), Catch::Contains("f.yaml"));
  CHECK_THAT(section_error("{staircase: [[100, 3], [64, 9]]}"), Catch::Contains("100") && Catch::Contains("divide"));
}

TEST_CASE("schedule grammar: rule 4's block lengths have two spellings that mean the same", "[config][schedule]") {
  const ScheduleRules defaults = rules("{}");
  CHECK(defaults.block_min == 2);
  CHECK(defaults.block_max == 4);
  CHECK(defaults.baseline_share == 0.5);
  CHECK_FALSE(defaults.strict);
  for (const char* yaml : {"{block: [1, 3]}", "{block_min: 1, block_max: 3}"}) {
    INFO(yaml);
    const ScheduleRules r = rules(yaml);
    CHECK(r.block_min == 1);
    CHECK(r.block_max == 3);
  }
  const ScheduleRules one = rules("{block: 3}");  // one length: min = max
  CHECK(one.block_min == 3);
  CHECK(one.block_max == 3);
  const ScheduleRules all = rules("{block_max: 6, baseline_share: 0.25, strict: true}");
  CHECK(all.block_min == 2);
  CHECK(all.block_max == 6);
  CHECK(all.baseline_share == 0.25);
  CHECK(all.strict);
  CHECK_THROWS_WITH(rules("{block: [2, 3], block_max: 4}"), Catch::Contains("given twice") && Catch::Contains("s.yaml"));
  CHECK_THROWS_WITH(rules("{block: [2, 3, 4]}"), Catch::Contains("schedule.block") && Catch::Contains("[min, max]"));
  CHECK_THROWS_WITH(rules("{block: [0, 3]}"), Catch::Contains("[1, 1024]"));
  CHECK_THROWS_WITH(rules("{block: [two, 3]}"), Catch::Contains("list of integers"));
  CHECK_THROWS_WITH(rules("{block_min: 0}"), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(rules("{baseline_share: 1.5}"), Catch::Contains("baseline_share"));
}

TEST_CASE("schedule grammar: the rules decide what a config's schedule may be", "[config][schedule]") {
  // "3,6x3,12x8" holds width 256 for one layer: guideline 4 (2-4 layers) warns, unless relaxed.
  const std::string one_layer = "heads: \"3,6x3,12x8\"";
  CHECK(section("{" + one_layer + "}").rules.block_min == 2);
  CHECK_THAT(section_error("{" + one_layer + ", strict: true}"), Catch::Contains("rule 4"));
  CHECK(section_error("{" + one_layer + ", strict: true, block: [1, 4]}") == "no error");
  CHECK(section_error("{" + one_layer + ", strict: true, block_min: 1}") == "no error");
  // Hard rules fail whatever the guidelines say.
  CHECK_THAT(section_error("{heads: \"6x3,3x3,12x6\"}"), Catch::Contains("rule 2") && Catch::Contains("layer 3"));
  CHECK_THAT(section_error("{hedas: [1]}"), Catch::Contains("unknown key 'schedule.hedas'"));
}

TEST_CASE("schedule grammar: hard_rules: false lets a study train schedules outside the paper's space",
          "[config][schedule]") {
  // Decreasing (rule 2) and ending wide (rule 3): warnings, not errors, once relaxed.
  const ScheduleSection s = section("{heads: \"12x6,6x3,3x3\", hard_rules: false}");
  CHECK_FALSE(s.rules.hard);
  const auto found = check_schedule(s.schedule, 12, 768, 12, s.rules);
  CHECK(found.ok());
  bool warned_2 = false, warned_3 = false;
  for (const auto& f : found.warnings()) {
    warned_2 = warned_2 || f.rule == Rule::Monotonicity;
    warned_3 = warned_3 || f.rule == Rule::BoundaryConvergence;
  }
  CHECK(warned_2);
  CHECK(warned_3);
  CHECK(section_error("{heads: \"1x12\", hard_rules: false}") == "no error");
  // Rule 1 holds whatever: the model cannot split d_model otherwise.
  CHECK_THAT(section_error("{heads: \"5x12\", hard_rules: false}"), Catch::Contains("rule 1"));
  CHECK_THAT(section_error("{heads: \"12x6,6x3,3x3\"}"), Catch::Contains("rule 2") && Catch::Contains("hard_rules: false"));
  // The resolved config says so only when relaxed (other configs' text is unchanged).
  const Config relaxed = parse_config(YAML::Load("model: {preset: gpt2-124m}\nschedule: {heads: \"1x12\", hard_rules: false}\n"), "c.yaml");
  CHECK_THAT(to_yaml(relaxed), Catch::Contains("hard_rules: false"));
  const Config plain = parse_config(YAML::Load("model: {preset: gpt2-124m}\n"), "c.yaml");
  CHECK(to_yaml(plain).find("hard_rules") == std::string::npos);
}

TEST_CASE("schedule grammar: a sweep's chosen schedule stands in for the section's form", "[config][schedule]") {
  // The section's own form is not read (not even checked), its rules are.
  const ScheduleSection s = section("{staircase: [[100, 3]], block_max: 3}", kPaper);
  CHECK(s.schedule == kPaper);
  CHECK(s.rules.block_max == 3);
  CHECK_THAT(section_error("{strict: true}", HeadSchedule::parse("3,6x3,12x8")), Catch::Contains("rule 4"));
  CHECK_THAT(section_error("{}", HeadSchedule::parse("12x11")), Catch::Contains("11 layers"));
  // Through the whole config as well: parse_config's `schedule` argument.
  const Config c = parse_config(YAML::Load("model: {preset: gpt2-124m}\nschedule: {uniform: 12, block_min: 1}\n"),
                                "c.yaml", nullptr, kPaper);
  CHECK(c.schedule == kPaper);
  CHECK(c.rules.block_min == 1);
  CHECK(parse_config(YAML::Load(to_yaml(c)), "again").schedule == kPaper);
}

TEST_CASE("schedule grammar: schedule.enumerate is head_dims plus the same rules", "[config][schedule]") {
  const EnumerationSpace a = enumeration("{head_dims: [256, 128], block: [2, 3], baseline_share: 0.5}");
  const EnumerationSpace b = enumeration("{head_dims: [256, 128], block_min: 2, block_max: 3, baseline_share: 0.5}");
  for (const EnumerationSpace* sp : {&a, &b}) {
    CHECK(sp->n_layer == 12);
    CHECK(sp->d_model == 768);
    CHECK(sp->h_base == 12);
    CHECK(sp->head_dims == std::vector<int>{256, 128});
    CHECK(sp->rules.block_min == 2);
    CHECK(sp->rules.block_max == 3);
  }
  CHECK(enumerate_schedules(a) == enumerate_schedules(b));
  CHECK(enumeration("{}").head_dims.empty());  // the enumerator's default widths
  CHECK_THROWS_WITH(enumeration("{head_dim: [64]}"),
                    Catch::Contains("unknown key 'sweep.grid.schedule.enumerate.head_dim'") &&
                        Catch::Contains("head_dims"));
  CHECK_THROWS_WITH(enumeration("{block: [2, 3], block_min: 1}"), Catch::Contains("given twice"));
}
