#include "prism/sweep/grid.h"

#include <fmt/format.h>

#include <algorithm>

#include "prism/error.h"

namespace prism {

namespace {

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

}  // namespace prism
