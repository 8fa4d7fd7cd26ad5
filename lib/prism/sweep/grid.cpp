#include "prism/sweep/grid.h"

#include <fmt/format.h>

#include <algorithm>

#include "prism/config/model_config.h"
#include "prism/config/schedule_section.h"
#include "prism/error.h"
#include "prism/schedule/enumerate.h"

namespace prism {

namespace {

// Adds schedules in order, each once.
class ScheduleList {
 public:
  void add(const HeadSchedule& s) {
    if (std::find(list_.begin(), list_.end(), s) == list_.end()) list_.push_back(s);
  }
  std::vector<HeadSchedule> take() { return std::move(list_); }

 private:
  std::vector<HeadSchedule> list_;
};

// sweep.grid.schedule.heads: each value in the schedule grammar's `heads` form.
void add_listed(ScheduleList& out, const GridAxis& axis) {
  for (size_t i = 0; i < axis.values.size(); ++i) {
    try {
      out.add(parse_heads(axis.values[i], axis.where));
    } catch (const Error& e) {
      throw Error(fmt::format("sweep.grid.schedule.heads[{}] = {} is not a schedule ({})", i,
                              override_value(axis.values[i]), e.what_part()),
                  axis.where, "write each schedule as a list of head counts or a compact form like \"1x2,4x4\"");
    }
  }
}

// sweep.grid.schedule.enumerate: the enumerator's schedules for this point's model.
void add_enumerated(ScheduleList& out, const GridAxis& axis, const ModelConfig& model,
                    const std::shared_ptr<KeyOrigins>& origins) {
  EnumerationSpace sp =
      parse_enumeration_section(ConfigNode(axis.values[0], axis.where, "sweep.grid.schedule.enumerate", origins), model);
  sp.include_uniform = false;  // the baseline is added (or not) by `sweep.baseline`
  std::vector<HeadSchedule> found;
  try {
    found = enumerate_schedules(sp);
  } catch (const Error& e) {
    throw Error(e.what_part(), axis.where + " (" + e.where() + ")", e.fix());
  }
  if (found.empty())
    throw Error(fmt::format("schedule.enumerate finds no schedule for {} layers x {} with {} baseline heads",
                            model.n_layer, model.d_model, model.n_head),
                axis.where, "allow more head_dims, a wider block range or a smaller baseline_share");
  for (const auto& s : found) out.add(s);
}


std::string join_key(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

void flatten(const YAML::Node& node, const std::string& prefix, const KeyOrigins& origins, const std::string& source,
             std::vector<GridAxis>& out) {
  for (const auto& kv : node) {
    const std::string key = join_key(prefix, kv.first.Scalar());
    const std::string origin_key = "sweep.grid." + key;
    const auto it = origins.find(origin_key);
    const std::string where = (it != origins.end() ? it->second : source) + " key " + origin_key;
    const YAML::Node& v = kv.second;
    if (key == "schedule.enumerate") {
      if (!v.IsMap())
        throw Error("sweep.grid.schedule.enumerate must be a mapping of enumeration settings", where,
                    "write e.g. schedule.enumerate: {head_dims: [256, 128], block: [2, 4], baseline_share: 0.5}");
      out.push_back({key, {v}, where});
      continue;
    }
    if (v.IsMap()) {
      flatten(v, key, origins, source, out);
      continue;
    }
    if (key == "schedule.uniform" || key == "schedule.staircase")
      throw Error(fmt::format("sweep.grid.{} cannot be swept", key), where,
                  "list schedules under schedule.heads (any compact form, e.g. \"3x3,6x3,12x6\") or generate them "
                  "with schedule.enumerate");
    GridAxis axis{key, {}, where};
    if (v.IsSequence()) {
      for (const auto& item : v) axis.values.push_back(item);
    } else if (v.IsScalar()) {
      axis.values.push_back(v);
    }
    if (axis.values.empty())
      throw Error(fmt::format("the search space is empty: sweep.grid.{} has no values", key), where,
                  fmt::format("give {} a list of values, e.g. [0, 1], or remove it", key));
    // `train.seed: [...]` and `train: {seed: [...]}` name one axis (an override
    // sweep.grid.train.seed=[...] writes the nested form): the later one wins.
    auto same = std::find_if(out.begin(), out.end(), [&](const GridAxis& a) { return a.key == key; });
    if (same != out.end()) *same = axis;
    else out.push_back(axis);
  }
}

}  // namespace

std::vector<GridAxis> parse_grid(const YAML::Node& grid, const KeyOrigins& origins, const std::string& source) {
  std::vector<GridAxis> axes;
  if (!grid || grid.IsNull()) return axes;
  if (!grid.IsMap())
    throw Error("sweep.grid must be a mapping of key: [values]", source + " key sweep.grid",
                "write e.g. grid: {train.seed: [0, 1], train.lr: [3.0e-4, 6.0e-4]}");
  flatten(grid, "", origins, source, axes);
  return axes;
}

std::vector<std::vector<YAML::Node>> grid_points(const std::vector<GridAxis>& axes) {
  std::vector<std::vector<YAML::Node>> points{{}};
  for (const auto& axis : axes) {
    std::vector<std::vector<YAML::Node>> next;
    for (const auto& p : points)
      for (const auto& v : axis.values) {
        next.push_back(p);
        next.back().push_back(v);
      }
    points = std::move(next);
  }
  return points;
}

std::string override_value(const YAML::Node& value) {
  if (value.IsScalar()) return value.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << value;
  return out.c_str();
}

std::string name_label(const YAML::Node& value) {
  std::string text = value.IsScalar() ? value.Scalar() : override_value(value);
  std::string out;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' || c == '-';
    if (ok) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "x" : out;
}

bool is_schedule_axis(const std::string& key) { return key == "schedule.heads" || key == "schedule.enumerate"; }

std::vector<HeadSchedule> grid_schedules(const std::vector<GridAxis>& axes, const ModelConfig& model,
                                         const std::shared_ptr<KeyOrigins>& origins, bool baseline) {
  ScheduleList out;
  if (baseline) out.add(HeadSchedule::uniform(model.n_layer, model.n_head));
  for (const auto& axis : axes) {
    if (axis.key == "schedule.heads") add_listed(out, axis);
    else if (axis.key == "schedule.enumerate") add_enumerated(out, axis, model, origins);
  }
  return out.take();
}

}  // namespace prism
