#pragma once
// The search space of a sweep file, `sweep.grid`: one axis per key, each a list
// of values (`train.seed: [0, 1]`, `model: [cpu-128, cpu-192]` for a config
// group), plus the schedule axes `schedule.heads` (explicit schedules) and
// `schedule.enumerate` (a generator). Keys may be dotted or nested
// (`train: {seed: [0, 1]}` is `train.seed`), so a command line can say
// `sweep.grid.train.seed=[0,1,2]`.
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "prism/config/config_node.h"
#include "prism/schedule/head_schedule.h"

namespace prism {

struct ModelConfig;

struct GridAxis {
  std::string key;                  // "train.seed", "model", "schedule.heads", "schedule.enumerate"
  std::vector<YAML::Node> values;   // one per grid point (schedule.enumerate: the spec, once)
  std::string where;                // file:line of the key, for messages
};

// Flattens `sweep.grid` into axes in file order. Throws prism::Error for an
// axis without values (an empty search space) or a misplaced schedule key.
std::vector<GridAxis> parse_grid(const YAML::Node& grid, const KeyOrigins& origins, const std::string& source);

// Every combination of the axes' values, the first axis varying slowest.
std::vector<std::vector<YAML::Node>> grid_points(const std::vector<GridAxis>& axes);

// The value as it goes into an override: scalars as written, lists in flow style.
std::string override_value(const YAML::Node& value);

// A value as it appears in a trial name: [A-Za-z0-9._+-] only.
std::string name_label(const YAML::Node& value);

// schedule.heads and schedule.enumerate: the axes that give schedules, not config values.
bool is_schedule_axis(const std::string& key);

// The schedules the schedule axes among `axes` give for `model`: the uniform baseline first (when
// `baseline`), then each listed (schedule.heads) and enumerated (schedule.enumerate) one in axis
// order, each once; other axes are passed over. The one expander of a grid's schedules: a sweep's
// grid points and the grid a search file stands in for both read it. Throws prism::Error naming
// the axis for a value that is no schedule, or an enumeration that finds none.
std::vector<HeadSchedule> grid_schedules(const std::vector<GridAxis>& axes, const ModelConfig& model,
                                         const std::shared_ptr<KeyOrigins>& origins, bool baseline);

}  // namespace prism
