#include "prism/sweep/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "prism/config/compose.h"
#include "prism/config/config.h"
#include "prism/config/schedule_section.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/folder_name.h"
#include "prism/schedule/enumerate.h"
#include "prism/sweep/grid.h"
#include "prism/sweep/settings_yaml.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

bool keys_overlap(const std::string& a, const std::string& b) {
  return a == b || a.rfind(b + ".", 0) == 0 || b.rfind(a + ".", 0) == 0;
}

// `halving: true`, or a mapping of the settings (enabled unless it says otherwise).
HalvingSettings parse_halving(ConfigNode& s) {
  HalvingSettings out;
  const YAML::Node halving = s.raw("halving");
  if (!halving || halving.IsNull()) return out;
  if (halving.IsScalar()) {
    out.enabled = s.get<bool>("halving", false);
    return out;
  }
  ConfigNode h = s.child("halving");
  out.enabled = h.get<bool>("enabled", true);
  out.eta = static_cast<int>(h.get_int("eta", out.eta, 2, 1000));
  out.min_steps = h.get_int("min_steps", 0, 0, 1LL << 50);
  out.keep_baseline = h.get<bool>("keep_baseline", true);
  out.noise_k = h.get_real("noise_k", out.noise_k, 0.0, 100.0);
  out.rung_seeds = static_cast<int>(h.get_int("rung_seeds", 0, 0, 1 << 20));
  h.finish();
  return out;
}

SlurmSettings parse_slurm(ConfigNode sl) {
  SlurmSettings out;
  out.partition = sl.get<std::string>("partition", "");
  out.time = sl.get<std::string>("time", "");
  out.mem = sl.get<std::string>("mem", "");
  out.account = sl.get<std::string>("account", "");
  out.cpus_per_task = static_cast<int>(sl.get_int("cpus_per_task", 0, 0, 4096));
  out.max_parallel = static_cast<int>(sl.get_int("max_parallel", 0, 0, 1 << 20));
  out.max_waves = static_cast<int>(sl.get_int("max_waves", 20, 1, 10000));
  out.signal_seconds = static_cast<int>(sl.get_int("signal_seconds", out.signal_seconds, 0, 65535));
  out.max_requeues = static_cast<int>(sl.get_int("max_requeues", out.max_requeues, 0, 100000));
  out.extra = sl.get<std::vector<std::string>>("extra", {});
  if (sl.has("collect")) {
    ConfigNode c = sl.child("collect");
    out.collect.partition = c.get<std::string>("partition", out.collect.partition);
    out.collect.time = c.get<std::string>("time", out.collect.time);
    out.collect.mem = c.get<std::string>("mem", out.collect.mem);
    out.collect.cpus = static_cast<int>(c.get_int("cpus", out.collect.cpus, 1, 4096));
    out.collect.extra = c.get<std::vector<std::string>>("extra", {});
    c.finish();
  }
  sl.finish();
  return out;
}

}  // namespace

EstimateSettings parse_estimate_section(ConfigNode est) {
  EstimateSettings out;
  out.tokens_per_s = est.get_real("tokens_per_s", 0, 0, 1e12);
  out.peak_flops = est.get_real("peak_flops", 0, 0, 1e20);
  out.mfu = est.get_real("mfu", 0, 0, 1);
  if ((out.peak_flops > 0) != (out.mfu > 0))
    throw Error(fmt::format("{} and {} go together: both or neither", est.key_path("peak_flops"), est.key_path("mfu")),
                est.where("mfu"),
                "state the device's peak FLOP/s and the utilisation you expect, e.g. {peak_flops: 989e12, mfu: 0.4}");
  out.device = est.get<std::string>("device", "");
  out.source = est.get<std::string>("source", "");
  est.finish();
  return out;
}

namespace {

PowerSettings parse_power(ConfigNode p) {
  PowerSettings out;
  out.sd = p.get_real("sd", 0, 0, 10);
  out.source = p.get<std::string>("source", "");
  out.effect = p.get_real("effect", 0, 0, 10);
  if (out.sd > 0 && out.source.empty())
    throw Error(fmt::format("{} without {}", p.key_path("sd"), p.key_path("source")), p.where("sd"),
                "say where the sd of the paired differences comes from, e.g. source: \"cpu-study width 128, 6 seeds\"");
  p.finish();
  return out;
}

SequentialSettings parse_sequential(ConfigNode q) {
  SequentialSettings out;
  out.first = q.get<int>("first", 0);
  out.step = q.get<int>("step", 0);
  out.cap = q.get<int>("cap", 0);
  const bool any = out.first || out.step || out.cap;
  if (any && (out.first < 2 || out.step < 1 || out.cap < out.first))
    throw Error(fmt::format("{} >= 2, {} >= 1 and {} >= first are needed (got {}, {}, {})", q.key_path("first"),
                            q.key_path("step"), q.key_path("cap"), out.first, out.step, out.cap),
                q.where("first"), "e.g. sequential: {first: 3, step: 3, cap: 21}");
  q.finish();
  return out;
}

SweepSettings parse_settings(ConfigNode s, const std::string& default_name) {
  SweepSettings out;
  out.name = s.get<std::string>("name", default_name);
  check_folder_name("sweep name", out.name, s.where("name"));
  out.baseline = s.get<bool>("baseline", true);
  out.jobs = static_cast<int>(s.get_int("jobs", 1, 1, 4096));
  out.threads = static_cast<int>(s.get_int("threads", 0, 0, 4096));
  out.timeout_s = s.get_real("timeout", 0, 0, 1e9);
  s.raw("grid");  // read by parse_grid
  out.halving = parse_halving(s);
  out.slurm = parse_slurm(s.child("slurm"));
  out.estimate = parse_estimate_section(s.child("estimate"));
  out.power = parse_power(s.child("power"));
  out.sequential = parse_sequential(s.child("sequential"));
  s.finish();
  return out;
}

// --- the schedules of a grid point --------------------------------------------

// The schedules of one grid point: the baseline, then the listed and enumerated
// ones in axis order; without schedule axes, the config's own schedule.
std::vector<HeadSchedule> point_schedules(const std::vector<GridAxis>& schedule_axes, const ModelConfig& model,
                                          const ComposedConfig& point, const std::string& source, bool baseline) {
  std::vector<HeadSchedule> out = grid_schedules(schedule_axes, model, point.origins, baseline);
  if (schedule_axes.empty()) {
    ConfigNode top(point.root, source, {}, point.origins);
    const HeadSchedule own = parse_schedule_section(top.child("schedule"), model).schedule;
    if (std::find(out.begin(), out.end(), own) == out.end()) out.push_back(own);
  }
  return out;
}

std::string schedule_name(const HeadSchedule& s) {
  std::string c = s.compact();
  std::replace(c.begin(), c.end(), ',', '-');
  return "h" + c;
}

// --- the grid --------------------------------------------------------------------

// The grid's axes, the schedule axes apart: each grid point of the other axes
// expands into the schedules that the schedule axes give for its model.
struct SearchSpace {
  std::vector<GridAxis> schedule_axes, other_axes;
  size_t schedule_position = 0;  // how many other axes come before the schedule axis
};

SearchSpace split_axes(const std::vector<GridAxis>& axes) {
  SearchSpace space;
  for (const auto& a : axes) {
    if (is_schedule_axis(a.key)) {
      if (space.schedule_axes.empty()) space.schedule_position = space.other_axes.size();
      space.schedule_axes.push_back(a);
    } else {
      space.other_axes.push_back(a);
    }
  }
  return space;
}

// The grid keys in order, with "schedule" where the schedule axis stands.
std::vector<std::string> axis_names(const SearchSpace& space) {
  std::vector<std::string> names;
  for (const auto& a : space.other_axes) names.push_back(a.key);
  names.insert(names.begin() + static_cast<long>(space.schedule_position), "schedule");
  return names;
}

// A command-line override may not set what the grid sweeps.
void check_overrides(const std::vector<Override>& cli, const SearchSpace& space) {
  for (const auto& o : cli) {
    if (o.key == "sweep" || o.key.rfind("sweep.", 0) == 0) continue;
    for (const auto& a : space.other_axes)
      if (keys_overlap(o.key, a.key))
        throw Error(fmt::format("override '{}' conflicts with the swept key {}", o.text, a.key), a.where,
                    fmt::format("drop the override, or sweep other values with sweep.grid.{}=[...]", a.key));
    if (!space.schedule_axes.empty() && keys_overlap(o.key, "schedule.heads"))
      throw Error(fmt::format("override '{}' conflicts with the swept schedules", o.text), space.schedule_axes[0].where,
                  "drop the override, or list the schedules under sweep.grid.schedule.heads");
  }
}

// A grid value as it appears in trial names: "lr3.0e-3", prefixed by the key's
// last part unless two axes share it; a config group's option alone.
class ValueLabels {
 public:
  explicit ValueLabels(const std::vector<GridAxis>& axes) {
    for (const auto& a : axes) last_parts_[last_part(a.key)]++;
  }
  std::string operator()(const std::string& key, const YAML::Node& value) const {
    std::string prefix;
    if (key.find('.') != std::string::npos) prefix = last_parts_.at(last_part(key)) > 1 ? key : last_part(key);
    return prefix + name_label(value);
  }

 private:
  static std::string last_part(const std::string& key) { return key.substr(key.rfind('.') + 1); }
  std::map<std::string, int> last_parts_;
};

// One point of the grid of the other axes.
struct GridPoint {
  std::vector<size_t> index;                                // the value index of each axis
  std::vector<Override> overrides;                          // the command line's, then the point's values
  std::vector<std::pair<std::string, std::string>> params;  // (key, value) per axis
  std::vector<std::string> labels, group_labels;            // name parts (group: without the seed)
};

// Point p of grid_points(axes), the last axis varying fastest.
GridPoint grid_point(const std::vector<GridAxis>& axes, const std::vector<YAML::Node>& values, size_t p,
                     const std::vector<Override>& cli, const ValueLabels& label) {
  GridPoint g;
  g.index.assign(axes.size(), 0);
  size_t rest = p;
  for (size_t a = axes.size(); a-- > 0;) {
    g.index[a] = rest % axes[a].values.size();
    rest /= axes[a].values.size();
  }
  g.overrides = cli;
  for (size_t a = 0; a < axes.size(); ++a) {
    const std::string value = override_value(values[a]);
    g.overrides.push_back(parse_override(axes[a].key + "=" + value, "sweep grid"));
    g.params.emplace_back(axes[a].key, value);
    g.labels.push_back(label(axes[a].key, values[a]));
    if (axes[a].key != "train.seed") g.group_labels.push_back(g.labels.back());
  }
  return g;
}

// --- trials --------------------------------------------------------------------------

struct Candidate {
  std::vector<size_t> order;  // the grid position, the schedule axis in its place
  Trial trial;
};

// The trial of one schedule at one grid point, its config validated.
Trial make_trial(const ComposedConfig& point_config, const std::string& source, const GridPoint& point,
                 const HeadSchedule& schedule, size_t schedule_position) {
  Trial t;
  std::vector<std::string> name_parts = point.labels, group_parts = point.group_labels;
  name_parts.insert(name_parts.begin() + static_cast<long>(schedule_position), schedule_name(schedule));
  group_parts.insert(group_parts.begin() + static_cast<long>(std::min(schedule_position, group_parts.size())),
                     schedule_name(schedule));
  t.name = fmt::format("{}", fmt::join(name_parts, "_"));
  t.group = fmt::format("{}", fmt::join(group_parts, "_"));
  Config cfg;
  try {
    cfg = parse_config(point_config.root, source, point_config.origins, schedule);
  } catch (const Error& e) {
    throw Error(fmt::format("trial {}: {}", t.name, e.what_part()), e.where(), e.fix());
  }
  t.schedule = cfg.schedule;
  t.baseline = cfg.schedule == HeadSchedule::uniform(cfg.model.n_layer, cfg.model.n_head);
  t.seed = cfg.train.seed;
  t.params = point.params;
  t.config = to_yaml(cfg) + "\n";  // as a YAML literal block reads it back
  t.max_steps = cfg.train.max_steps;
  t.step_tokens = cfg.train.tokens_per_step > 0 ? cfg.train.tokens_per_step : cfg.train.batch_size * cfg.train.seq_len;
  return t;
}

// The trials of one grid point: the sweep file composed with the point's values, one trial per schedule.
std::vector<Candidate> expand_point(const std::string& path, const std::string& sweep_source, const SearchSpace& space,
                                    const GridPoint& point, bool baseline) {
  ComposedConfig c = compose(path, point.overrides);
  c.root.remove("sweep");
  const std::string source = fmt::format("{} (sweep point {})", sweep_source, fmt::join(point.labels, " "));
  ModelConfig model;
  {
    ConfigNode top(c.root, source, {}, c.origins);
    model = parse_model_section(top.child("model"));
  }
  const auto schedules = point_schedules(space.schedule_axes, model, c, source, baseline);
  if (schedules.empty())
    throw Error("the search space is empty: no schedule to run", sweep_source + " key sweep",
                "set sweep.baseline: true or list schedules under sweep.grid");
  std::vector<Candidate> out;
  const auto split = point.index.begin() + static_cast<long>(space.schedule_position);
  for (size_t s = 0; s < schedules.size(); ++s) {
    Candidate cand;
    cand.order.assign(point.index.begin(), split);
    cand.order.push_back(s);
    cand.order.insert(cand.order.end(), split, point.index.end());
    cand.trial = make_trial(c, source, point, schedules[s], space.schedule_position);
    out.push_back(std::move(cand));
  }
  return out;
}

// Trials in grid order (the schedule axis in its place), numbered, names made unique.
void order_trials(std::vector<Candidate> candidates, SweepPlan& plan) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.order < b.order; });
  std::map<std::string, int> seen;
  for (auto& c : candidates) {
    Trial t = std::move(c.trial);
    if (int n = seen[t.name]++; n > 0) t.name += fmt::format("-{}", n + 1);  // labels that sanitise alike
    t.index = static_cast<int>(plan.trials.size());
    plan.trials.push_back(std::move(t));
  }
}

// Successive halving compares runs at equal budgets.
void check_halving_budgets(const SweepPlan& plan) {
  for (const auto& t : plan.trials)
    if (t.max_steps != plan.trials[0].max_steps)
      throw Error(fmt::format("successive halving needs one train.max_steps for all trials; {} has {}, {} has {}",
                              plan.trials[0].name, plan.trials[0].max_steps, t.name, t.max_steps),
                  plan.source + " key sweep.halving", "sweep train.max_steps without halving, or fix it");
}

}  // namespace

std::string schedule_label(const Trial& t) { return t.baseline ? "uniform" : t.schedule.compact(); }

Config trial_config(const Trial& t) {
  Config c = parse_config(YAML::Load(t.config), "trial " + t.name);
  resolve_vocabulary(c);
  return c;
}

std::string SweepPlan::definition() const {
  std::string d;
  if (settings.halving.enabled)
    d += fmt::format("halving eta={} min_steps={} keep_baseline={} noise_k={} rung_seeds={}\n", settings.halving.eta,
                     settings.halving.min_steps, settings.halving.keep_baseline, settings.halving.noise_k,
                     settings.halving.rung_seeds);
  for (const auto& t : trials) d += "trial " + t.name + "\n" + t.config + "\n";
  return d;
}

const Trial& SweepPlan::trial(const std::string& name) const {
  for (const auto& t : trials)
    if (t.name == name) return t;
  throw Error(fmt::format("no trial named '{}' in sweep {}", name, settings.name), source,
              "list the trials with prism sweep --dry-run");
}

SweepPlan plan_sweep(const std::string& path, const std::vector<std::string>& overrides) {
  const auto cli = parse_overrides(overrides, "command line");
  const ComposedConfig base = compose(path, cli);
  SweepPlan plan;
  plan.source = base.source;
  plan.overrides = overrides;
  const YAML::Node sweep = base.root["sweep"];
  if (!sweep || !sweep.IsMap())
    throw Error("this file has no `sweep:` section", base.source,
                "add `sweep: {grid: {train.seed: [0, 1]}}` (see experiments/sweeps/), or run one config with prism train");
  plan.settings = parse_settings(ConfigNode(sweep, base.source, "sweep", base.origins), fs::path(path).stem().string());
  const SearchSpace space = split_axes(parse_grid(sweep["grid"], *base.origins, base.source));
  check_overrides(cli, space);
  plan.axes = axis_names(space);

  const ValueLabels labels(space.other_axes);
  const auto points = grid_points(space.other_axes);
  std::vector<Candidate> candidates;
  for (size_t p = 0; p < points.size(); ++p) {
    const GridPoint point = grid_point(space.other_axes, points[p], p, cli, labels);
    for (auto& c : expand_point(path, base.source, space, point, plan.settings.baseline)) candidates.push_back(std::move(c));
  }
  order_trials(std::move(candidates), plan);
  if (plan.settings.halving.enabled) check_halving_budgets(plan);
  return plan;
}

namespace {

// `key: value` in the mapping being emitted; manipulators (YAML::Flow, ...) come before the value.
template <class... Value>
void entry(YAML::Emitter& out, const std::string& key, const Value&... value) {
  out << YAML::Key << key << YAML::Value;
  (out << ... << value);
}

void emit_trial(YAML::Emitter& out, const Trial& t) {
  out << YAML::BeginMap;
  entry(out, "index", t.index);
  entry(out, "name", t.name);
  entry(out, "group", t.group);
  entry(out, "schedule", t.schedule.compact());
  entry(out, "heads", YAML::Flow, t.schedule.heads());
  entry(out, "baseline", t.baseline);
  entry(out, "seed", t.seed);
  entry(out, "params", YAML::Flow, YAML::BeginMap);
  for (const auto& [k, v] : t.params) entry(out, k, v);
  out << YAML::EndMap;
  entry(out, "max_steps", t.max_steps);
  entry(out, "step_tokens", t.step_tokens);
  entry(out, "config", YAML::Literal, t.config);
  out << YAML::EndMap;
}

}  // namespace

std::string plan_to_yaml(const SweepPlan& plan) {
  YAML::Emitter out;
  out << YAML::Comment("prism sweep: the resolved sweep. Written by prism; change the sweep file instead.");
  out << YAML::BeginMap;
  entry(out, "name", plan.settings.name);
  entry(out, "source", plan.source);
  entry(out, "overrides", YAML::Flow, plan.overrides);
  entry(out, "prism_version", PRISM_VERSION);
  entry(out, "axes", YAML::Flow, plan.axes);
  entry(out, "settings", YAML::Node(plan.settings));
  entry(out, "trials", YAML::BeginSeq);
  for (const auto& t : plan.trials) emit_trial(out, t);
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

SweepPlan plan_from_yaml(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  SweepPlan plan;
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("sweep.yaml is not readable: {}", why), path,
                 "rerun the sweep from its sweep file (prism sweep FILE --out DIR --force rewrites sweep.yaml)");
  };
  try {
    plan.source = root["source"].as<std::string>();
    plan.overrides = root["overrides"].as<std::vector<std::string>>();
    plan.axes = root["axes"].as<std::vector<std::string>>();
    const std::string name = root["name"].as<std::string>();
    plan.settings = root["settings"].as<SweepSettings>();
    plan.settings.name = name;
    for (const auto& n : root["trials"]) {
      Trial t;
      t.index = n["index"].as<int>();
      t.name = n["name"].as<std::string>();
      t.group = n["group"].as<std::string>();
      t.schedule = HeadSchedule(n["heads"].as<std::vector<int>>());
      t.baseline = n["baseline"].as<bool>();
      t.seed = n["seed"].as<uint64_t>();
      for (const auto& kv : n["params"]) t.params.emplace_back(kv.first.Scalar(), kv.second.Scalar());
      t.max_steps = n["max_steps"].as<int64_t>();
      t.step_tokens = n["step_tokens"].as<int64_t>();
      t.config = n["config"].as<std::string>();
      plan.trials.push_back(std::move(t));
    }
  } catch (const YAML::Exception& e) {
    throw bad(e.msg);
  }
  return plan;
}

}  // namespace prism
