#pragma once
// The schedule grammar, read by one parser wherever a schedule is written: a
// config's `schedule:` section (config.h) and a sweep's schedule axes (sweep/plan.h).
//
//   schedule:
//     # the form: at most one (none: the model's uniform baseline, n_head in every layer)
//     heads: [1, 1, 4, 4, 4, 4]        # head counts per layer, or the compact "1x2,4x4"
//     uniform: 4                       # one count in every layer
//     staircase: [[128, 2], [32, 4]]   # [head_dim, layers] stairs, or "128:2,32:4"
//     # the rules (PAPER.md): guidelines 4-6 warn, or fail when strict
//     block: [2, 4]                    # rule 4: layers a wide width is held, [min, max] or
//                                      # one length; also spelled block_min: 2, block_max: 4
//     baseline_share: 0.5              # rule 5: share of layers at the baseline count
//     strict: false
//     hard_rules: true                 # false: rules 2-3 (monotone, last = baseline) only warn, for
//                                      # studies of schedules outside the paper's space (rule 1 holds)
//
//   sweep:
//     grid:
//       schedule.heads: [[1, 1, 4, 4, 4, 4], "2x2,4x4"]   # each one a `heads` value
//       schedule.enumerate: {head_dims: [128, 64], block: [2, 3], baseline_share: 0.5}
//                                      # the enumerator's wide widths + the rules above
//
// Errors are prism::Error naming the file and key.
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "prism/config/config_node.h"
#include "prism/config/model_config.h"
#include "prism/schedule/enumerate.h"
#include "prism/schedule/head_schedule.h"
#include "prism/schedule/rules.h"

namespace prism {

// A `heads` value: a list of head counts or a compact form ("3x3,6x3,12x6").
HeadSchedule parse_heads(const YAML::Node& value, const std::string& where);

// A `staircase` value: [[head_dim, layers], ...] or "256:3,128:3,64:6".
std::vector<Stair> parse_staircase(const YAML::Node& value, const std::string& where);

// The rules keys of a section: block (or block_min and block_max), baseline_share, strict, hard_rules.
ScheduleRules parse_schedule_rules(ConfigNode& section);

struct ScheduleSection {
  HeadSchedule schedule;  // one count per layer, valid for the model under `rules`
  ScheduleRules rules;
};

// A config's `schedule:` section for `model`. With `chosen` (a sweep trial's
// schedule), that schedule stands in for the section's form, which is then
// not read; the section's rules still apply. Throws prism::Error naming the
// key, or the rule and layer the schedule breaks.
ScheduleSection parse_schedule_section(ConfigNode section, const ModelConfig& model,
                                       const std::optional<HeadSchedule>& chosen = std::nullopt);

// `schedule.enumerate` of a sweep grid: the progressive schedules of `model`'s
// shape to enumerate (the uniform baseline included, as EnumerationSpace says).
EnumerationSpace parse_enumeration_section(ConfigNode section, const ModelConfig& model);

}  // namespace prism
