#include "prism/sweep/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "prism/config/compose.h"
#include "prism/config/config.h"
#include "prism/error.h"
#include "prism/schedule/enumerate.h"
#include "prism/sweep/grid.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

bool is_schedule_axis(const std::string& key) { return key == "schedule.heads" || key == "schedule.enumerate"; }

bool keys_overlap(const std::string& a, const std::string& b) {
  return a == b || a.rfind(b + ".", 0) == 0 || b.rfind(a + ".", 0) == 0;
}

void check_name(const std::string& name, const std::string& where) {
  bool ok = !name.empty() && name[0] != '.';
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!ok)
    throw Error(fmt::format("sweep name '{}' is not a plain folder name", name), where,
                "use letters, digits, '.', '_' and '-'");
}

SweepSettings parse_settings(ConfigNode s, const std::string& default_name) {
  SweepSettings out;
  out.name = s.get<std::string>("name", default_name);
  check_name(out.name, s.where("name"));
  out.baseline = s.get<bool>("baseline", true);
  out.jobs = static_cast<int>(s.get_int("jobs", 1, 1, 4096));
  out.threads = static_cast<int>(s.get_int("threads", 0, 0, 4096));
  out.timeout_s = s.get_real("timeout", 0, 0, 1e9);
  s.raw("grid");  // read by parse_grid
  YAML::Node halving = s.raw("halving");
  if (halving && !halving.IsNull() && halving.IsScalar()) {
    out.halving.enabled = s.get<bool>("halving", false);
  } else if (halving && !halving.IsNull()) {
    ConfigNode h = s.child("halving");
    out.halving.enabled = h.get<bool>("enabled", true);
    out.halving.eta = static_cast<int>(h.get_int("eta", out.halving.eta, 2, 1000));
    out.halving.min_steps = h.get_int("min_steps", 0, 0, 1LL << 50);
    out.halving.keep_baseline = h.get<bool>("keep_baseline", true);
    out.halving.noise_k = h.get_real("noise_k", out.halving.noise_k, 0.0, 100.0);
    h.finish();
  }
  ConfigNode sl = s.child("slurm");
  out.slurm.partition = sl.get<std::string>("partition", "");
  out.slurm.time = sl.get<std::string>("time", "");
  out.slurm.mem = sl.get<std::string>("mem", "");
  out.slurm.account = sl.get<std::string>("account", "");
  out.slurm.cpus_per_task = static_cast<int>(sl.get_int("cpus_per_task", 0, 0, 4096));
  out.slurm.max_parallel = static_cast<int>(sl.get_int("max_parallel", 0, 0, 1 << 20));
  out.slurm.max_waves = static_cast<int>(sl.get_int("max_waves", 20, 1, 10000));
  out.slurm.extra = sl.get<std::vector<std::string>>("extra", {});
  sl.finish();
  ConfigNode est = s.child("estimate");
  out.estimate.tokens_per_s = est.get_real("tokens_per_s", 0, 0, 1e12);
  out.estimate.peak_flops = est.get_real("peak_flops", 0, 0, 1e20);
  out.estimate.mfu = est.get_real("mfu", 0, 0, 1);
  if ((out.estimate.peak_flops > 0) != (out.estimate.mfu > 0))
    throw Error("sweep.estimate needs both peak_flops and mfu", est.where("mfu"),
                "state the device's peak FLOP/s and the utilisation you expect, e.g. {peak_flops: 989e12, mfu: 0.4}");
  out.estimate.device = est.get<std::string>("device", "");
  out.estimate.source = est.get<std::string>("source", "");
  est.finish();
  s.finish();
  return out;
}

// The schedules of one grid point: the baseline, explicit ones, enumerated ones.
std::vector<HeadSchedule> point_schedules(const std::vector<GridAxis>& schedule_axes, const ModelConfig& model,
                                          const YAML::Node& root, const std::shared_ptr<KeyOrigins>& origins,
                                          const std::string& source, bool baseline) {
  std::vector<HeadSchedule> out;
  auto add = [&](const HeadSchedule& s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  if (baseline) add(HeadSchedule::uniform(model.n_layer, model.n_head));
  if (schedule_axes.empty()) {
    ConfigNode top(root, source, {}, origins);
    add(parse_schedule_section(top.child("schedule"), model, nullptr));
  }
  for (const auto& axis : schedule_axes) {
    if (axis.key == "schedule.heads") {
      for (size_t i = 0; i < axis.values.size(); ++i) {
        const YAML::Node& v = axis.values[i];
        try {
          if (v.IsSequence()) {
            add(HeadSchedule(v.as<std::vector<int>>()));
          } else if (v.IsScalar()) {
            add(HeadSchedule::parse(v.Scalar()));
          } else {
            throw Error("not a schedule");
          }
        } catch (const std::exception& e) {
          throw Error(fmt::format("sweep.grid.schedule.heads[{}] = {} is not a schedule ({})", i, override_value(v),
                                  e.what()),
                      axis.where, "write each schedule as a list of head counts or a compact form like \"1x2,4x4\"");
        }
      }
      continue;
    }
    ConfigNode g(axis.values[0], axis.where, "sweep.grid.schedule.enumerate", origins);
    EnumerationSpace sp;
    sp.n_layer = model.n_layer;
    sp.d_model = model.d_model;
    sp.h_base = model.n_head;
    sp.include_uniform = false;  // the baseline is added (or not) by `sweep.baseline`
    sp.head_dims = g.get<std::vector<int>>("head_dims", {});
    YAML::Node block = g.raw("block");
    try {
      if (block && block.IsSequence() && block.size() == 2) {
        sp.rules.block_min = block[0].as<int>();
        sp.rules.block_max = block[1].as<int>();
      } else if (block && block.IsScalar()) {
        sp.rules.block_min = sp.rules.block_max = block.as<int>();
      } else if (block) {
        throw Error("bad block");
      }
    } catch (const std::exception&) {
      throw Error("sweep.grid.schedule.enumerate.block must be [min, max] or one length", g.where("block"),
                  "write e.g. block: [2, 4]");
    }
    sp.rules.baseline_share = g.get_real("baseline_share", sp.rules.baseline_share, 0.0, 1.0);
    sp.rules.strict = g.get<bool>("strict", false);
    g.finish();
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
    for (const auto& s : found) add(s);
  }
  return out;
}

void set_schedule(YAML::Node& root, const HeadSchedule& s, KeyOrigins& origins) {
  if (!root["schedule"] || !root["schedule"].IsMap()) root["schedule"] = YAML::Node(YAML::NodeType::Map);
  YAML::Node sched = root["schedule"];
  for (const char* form : {"heads", "uniform", "staircase"}) {
    if (sched[form]) sched.remove(form);
    origins.erase(std::string("schedule.") + form);
  }
  YAML::Node heads(YAML::NodeType::Sequence);
  for (int h : s.heads()) heads.push_back(h);
  heads.SetStyle(YAML::EmitterStyle::Flow);
  sched["heads"] = heads;
  origins["schedule.heads"] = "sweep grid schedule " + s.compact();
}

std::string schedule_name(const HeadSchedule& s) {
  std::string c = s.compact();
  std::replace(c.begin(), c.end(), ',', '-');
  return "h" + c;
}

}  // namespace

std::string schedule_label(const Trial& t) { return t.baseline ? "uniform" : t.schedule.compact(); }

std::string SweepPlan::definition() const {
  std::string d;
  if (settings.halving.enabled)
    d += fmt::format("halving eta={} min_steps={} keep_baseline={} noise_k={}\n", settings.halving.eta,
                     settings.halving.min_steps, settings.halving.keep_baseline, settings.halving.noise_k);
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
  const auto axes = parse_grid(sweep["grid"], *base.origins, base.source);

  std::vector<GridAxis> schedule_axes, other_axes;
  size_t schedule_position = 0;  // how many other axes come before the schedule axis
  for (const auto& a : axes) {
    if (is_schedule_axis(a.key)) {
      if (schedule_axes.empty()) schedule_position = other_axes.size();
      schedule_axes.push_back(a);
    } else {
      other_axes.push_back(a);
    }
  }
  for (const auto& o : cli) {
    if (o.key == "sweep" || o.key.rfind("sweep.", 0) == 0) continue;
    for (const auto& a : other_axes)
      if (keys_overlap(o.key, a.key))
        throw Error(fmt::format("override '{}' conflicts with the swept key {}", o.text, a.key), a.where,
                    fmt::format("drop the override, or sweep other values with sweep.grid.{}=[...]", a.key));
    if (!schedule_axes.empty() && keys_overlap(o.key, "schedule.heads"))
      throw Error(fmt::format("override '{}' conflicts with the swept schedules", o.text), schedule_axes[0].where,
                  "drop the override, or list the schedules under sweep.grid.schedule.heads");
  }
  for (const auto& a : other_axes) plan.axes.push_back(a.key);
  plan.axes.insert(plan.axes.begin() + static_cast<long>(schedule_position), "schedule");

  // Label prefixes: the last key part, unless two axes share it.
  std::map<std::string, int> last_parts;
  for (const auto& a : other_axes) last_parts[a.key.substr(a.key.rfind('.') + 1)]++;
  auto prefix = [&](const std::string& key) {
    if (key.find('.') == std::string::npos) return std::string();  // a config group: the option alone
    const std::string last = key.substr(key.rfind('.') + 1);
    return last_parts[last] > 1 ? key : last;
  };

  struct Candidate {
    std::vector<size_t> order;  // sort key
    Trial trial;
  };
  std::vector<Candidate> candidates;
  const auto points = grid_points(other_axes);
  std::vector<size_t> index_tuple(other_axes.size(), 0);
  for (size_t p = 0; p < points.size(); ++p) {
    {  // the value indices of point p (the last axis varies fastest)
      size_t rest = p;
      for (size_t a = other_axes.size(); a-- > 0;) {
        index_tuple[a] = rest % other_axes[a].values.size();
        rest /= other_axes[a].values.size();
      }
    }
    auto overrides_p = cli;
    std::vector<std::pair<std::string, std::string>> params;
    std::vector<std::string> labels, group_labels;
    for (size_t a = 0; a < other_axes.size(); ++a) {
      const std::string value = override_value(points[p][a]);
      overrides_p.push_back(parse_override(other_axes[a].key + "=" + value, "sweep grid"));
      params.emplace_back(other_axes[a].key, value);
      const std::string label = prefix(other_axes[a].key) + name_label(points[p][a]);
      labels.push_back(label);
      if (other_axes[a].key != "train.seed") group_labels.push_back(label);
    }
    ComposedConfig c = compose(path, overrides_p);
    c.root.remove("sweep");
    const std::string source = fmt::format("{} (sweep point {})", base.source, fmt::join(labels, " "));
    ModelConfig model;
    {
      ConfigNode top(c.root, source, {}, c.origins);
      model = parse_model_section(top.child("model"));
    }
    const auto schedules = point_schedules(schedule_axes, model, c.root, c.origins, source, plan.settings.baseline);
    if (schedules.empty())
      throw Error("the search space is empty: no schedule to run", base.source + " key sweep",
                  "set sweep.baseline: true or list schedules under sweep.grid");
    for (size_t s = 0; s < schedules.size(); ++s) {
      YAML::Node root = YAML::Clone(c.root);
      KeyOrigins origins = *c.origins;
      set_schedule(root, schedules[s], origins);
      Trial t;
      std::vector<std::string> name_parts = labels, group_parts = group_labels;
      name_parts.insert(name_parts.begin() + static_cast<long>(schedule_position), schedule_name(schedules[s]));
      group_parts.insert(group_parts.begin() + static_cast<long>(std::min(schedule_position, group_parts.size())),
                         schedule_name(schedules[s]));
      t.name = fmt::format("{}", fmt::join(name_parts, "_"));
      t.group = fmt::format("{}", fmt::join(group_parts, "_"));
      Config cfg;
      try {
        cfg = parse_config(root, source, std::make_shared<const KeyOrigins>(origins));
      } catch (const Error& e) {
        throw Error(fmt::format("trial {}: {}", t.name, e.what_part()), e.where(), e.fix());
      }
      t.schedule = cfg.schedule;
      t.baseline = cfg.schedule == HeadSchedule::uniform(cfg.model.n_layer, cfg.model.n_head);
      t.seed = cfg.train.seed;
      t.params = params;
      t.config = to_yaml(cfg) + "\n";  // as a YAML literal block reads it back
      t.max_steps = cfg.train.max_steps;
      t.step_tokens = cfg.train.tokens_per_step > 0 ? cfg.train.tokens_per_step : cfg.train.batch_size * cfg.train.seq_len;
      Candidate cand;
      cand.order.assign(index_tuple.begin(), index_tuple.begin() + static_cast<long>(schedule_position));
      cand.order.push_back(s);
      cand.order.insert(cand.order.end(), index_tuple.begin() + static_cast<long>(schedule_position), index_tuple.end());
      cand.trial = std::move(t);
      candidates.push_back(std::move(cand));
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.order < b.order; });
  std::map<std::string, int> seen;
  for (auto& c : candidates) {
    Trial t = std::move(c.trial);
    if (int n = seen[t.name]++; n > 0) t.name += fmt::format("-{}", n + 1);  // labels that sanitise alike
    t.index = static_cast<int>(plan.trials.size());
    plan.trials.push_back(std::move(t));
  }
  if (plan.settings.halving.enabled) {
    for (const auto& t : plan.trials)
      if (t.max_steps != plan.trials[0].max_steps)
        throw Error(fmt::format("successive halving needs one train.max_steps for all trials; {} has {}, {} has {}",
                                plan.trials[0].name, plan.trials[0].max_steps, t.name, t.max_steps),
                    base.source + " key sweep.halving", "sweep train.max_steps without halving, or fix it");
  }
  return plan;
}

std::string plan_to_yaml(const SweepPlan& plan) {
  const SweepSettings& s = plan.settings;
  YAML::Emitter out;
  out << YAML::Comment("prism sweep: the resolved sweep. Written by prism; change the sweep file instead.");
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << s.name;
  out << YAML::Key << "source" << YAML::Value << plan.source;
  out << YAML::Key << "overrides" << YAML::Value << YAML::Flow << plan.overrides;
  out << YAML::Key << "prism_version" << YAML::Value << PRISM_VERSION;
  out << YAML::Key << "axes" << YAML::Value << YAML::Flow << plan.axes;
  out << YAML::Key << "settings" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "baseline" << YAML::Value << s.baseline;
  out << YAML::Key << "jobs" << YAML::Value << s.jobs;
  out << YAML::Key << "threads" << YAML::Value << s.threads;
  out << YAML::Key << "timeout" << YAML::Value << s.timeout_s;
  out << YAML::Key << "halving" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << s.halving.enabled;
  out << YAML::Key << "eta" << YAML::Value << s.halving.eta;
  out << YAML::Key << "min_steps" << YAML::Value << s.halving.min_steps;
  out << YAML::Key << "keep_baseline" << YAML::Value << s.halving.keep_baseline;
  out << YAML::Key << "noise_k" << YAML::Value << s.halving.noise_k;
  out << YAML::EndMap;
  out << YAML::Key << "slurm" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "partition" << YAML::Value << s.slurm.partition;
  out << YAML::Key << "time" << YAML::Value << s.slurm.time;
  out << YAML::Key << "mem" << YAML::Value << s.slurm.mem;
  out << YAML::Key << "account" << YAML::Value << s.slurm.account;
  out << YAML::Key << "cpus_per_task" << YAML::Value << s.slurm.cpus_per_task;
  out << YAML::Key << "max_parallel" << YAML::Value << s.slurm.max_parallel;
  out << YAML::Key << "max_waves" << YAML::Value << s.slurm.max_waves;
  out << YAML::Key << "extra" << YAML::Value << YAML::Flow << s.slurm.extra;
  out << YAML::EndMap;
  out << YAML::Key << "estimate" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "tokens_per_s" << YAML::Value << s.estimate.tokens_per_s;
  out << YAML::Key << "peak_flops" << YAML::Value << s.estimate.peak_flops;
  out << YAML::Key << "mfu" << YAML::Value << s.estimate.mfu;
  out << YAML::Key << "device" << YAML::Value << s.estimate.device;
  out << YAML::Key << "source" << YAML::Value << s.estimate.source;
  out << YAML::EndMap;
  out << YAML::EndMap;
  out << YAML::Key << "trials" << YAML::Value << YAML::BeginSeq;
  for (const auto& t : plan.trials) {
    out << YAML::BeginMap;
    out << YAML::Key << "index" << YAML::Value << t.index;
    out << YAML::Key << "name" << YAML::Value << t.name;
    out << YAML::Key << "group" << YAML::Value << t.group;
    out << YAML::Key << "schedule" << YAML::Value << t.schedule.compact();
    out << YAML::Key << "heads" << YAML::Value << YAML::Flow << t.schedule.heads();
    out << YAML::Key << "baseline" << YAML::Value << t.baseline;
    out << YAML::Key << "seed" << YAML::Value << t.seed;
    out << YAML::Key << "params" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& [k, v] : t.params) out << YAML::Key << k << YAML::Value << v;
    out << YAML::EndMap;
    out << YAML::Key << "max_steps" << YAML::Value << t.max_steps;
    out << YAML::Key << "step_tokens" << YAML::Value << t.step_tokens;
    out << YAML::Key << "config" << YAML::Value << YAML::Literal << t.config;
    out << YAML::EndMap;
  }
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
    const YAML::Node s = root["settings"];
    plan.settings.name = root["name"].as<std::string>();
    plan.settings.baseline = s["baseline"].as<bool>();
    plan.settings.jobs = s["jobs"].as<int>();
    plan.settings.threads = s["threads"].as<int>();
    plan.settings.timeout_s = s["timeout"].as<double>();
    plan.settings.halving.enabled = s["halving"]["enabled"].as<bool>();
    plan.settings.halving.eta = s["halving"]["eta"].as<int>();
    plan.settings.halving.min_steps = s["halving"]["min_steps"].as<int64_t>();
    plan.settings.halving.keep_baseline = s["halving"]["keep_baseline"].as<bool>();
    const YAML::Node sl = s["slurm"];
    plan.settings.slurm.partition = sl["partition"].as<std::string>();
    plan.settings.slurm.time = sl["time"].as<std::string>();
    plan.settings.slurm.mem = sl["mem"].as<std::string>();
    plan.settings.slurm.account = sl["account"].as<std::string>();
    plan.settings.slurm.cpus_per_task = sl["cpus_per_task"].as<int>();
    plan.settings.slurm.max_parallel = sl["max_parallel"].as<int>();
    plan.settings.slurm.max_waves = sl["max_waves"].as<int>();
    plan.settings.slurm.extra = sl["extra"].as<std::vector<std::string>>();
    if (const YAML::Node e = s["estimate"]) {  // absent in sweep.yaml files of older versions
      plan.settings.estimate.tokens_per_s = e["tokens_per_s"].as<double>();
      plan.settings.estimate.peak_flops = e["peak_flops"].as<double>();
      plan.settings.estimate.mfu = e["mfu"].as<double>();
      plan.settings.estimate.device = e["device"].as<std::string>();
      plan.settings.estimate.source = e["source"].as<std::string>();
    }
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
