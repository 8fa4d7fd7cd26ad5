#pragma once
// The resolved configuration of a run: YAML file(s) + key=value overrides,
// read strictly into typed sections. Unknown keys, wrong types and values out
// of range are errors naming the file and the key.
#include <yaml-cpp/yaml.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/config/config_node.h"
#include "prism/config/model_config.h"
#include "prism/config/train_config.h"
#include "prism/schedule/head_schedule.h"
#include "prism/schedule/rules.h"

namespace prism {

struct AttentionConfig {
  std::string backend = "auto";  // auto | reference | sdpa | fused | cuda
};

struct Config {
  ModelConfig model;
  HeadSchedule schedule;      // resolved to one count per layer
  ScheduleRules rules;        // schedule.strict and the guideline parameters
  std::vector<RuleFinding> schedule_warnings;  // guidelines the schedule does not follow
  AttentionConfig attention;
  TrainConfig train;
  DataConfig data;

  std::string source;         // where it came from, for messages
  YAML::Node resolved;        // the YAML after overrides, as read
  // Where model.vocab_size came from, for figures that depend on it (resolve_vocabulary
  // in data/dataset.h): "from data/cache/austen-bpe", "the preset's: no data.dir ...".
  std::string vocab_source;
};

// What load_config does with a sweep file's `sweep:` section: refuse it (train:
// the file is a sweep, and the error says to run `prism sweep`), or drop it and
// read the sweep's base config (schedule and bench inspect a study file's model).
enum class SweepSection { Refuse, Drop };

// Reads a YAML file; syntax errors name the file, line and column.
YAML::Node load_yaml_file(const std::string& path);
// Applies one key override to a plain tree: `a.b.c=value` (value in YAML syntax:
// 3e-4, [3,3,6], "text"), `+a.b=v`, `++a.b=v`, `~a.b` (compose.h has the rules).
void apply_override(YAML::Node& root, const std::string& assignment);

// Parses and validates a whole config. Throws prism::Error naming the key and,
// with `origins` (from composition), the file that set it. With `schedule` (a
// sweep trial's), that schedule stands in for the form the schedule section
// gives, and is checked against the section's rules (schedule_section.h).
Config parse_config(const YAML::Node& root, const std::string& source,
                    std::shared_ptr<const KeyOrigins> origins = nullptr,
                    const std::optional<HeadSchedule>& schedule = std::nullopt);
// Composes `path` (its defaults list, then the overrides, then ${...}; see
// compose.h) and parses the result. Path "" composes the overrides alone (a
// command given --model and --heads but no file). Commands read configs through
// compose_run_config (data/dataset.h), which also takes the vocabulary from the data.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   SweepSection sweep = SweepSection::Refuse);

// The `model:` section: a preset plus per-key changes. (The `schedule:` section
// is schedule_section.h's.)
ModelConfig parse_model_section(ConfigNode node);

// The resolved config as YAML text (model expanded, schedule as a list).
std::string to_yaml(const Config& c);

}  // namespace prism
