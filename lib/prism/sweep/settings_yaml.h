#pragma once
// A sweep's settings as YAML, both ways, written once per type (yaml-cpp's
// convert<>): what sweep.yaml records under `settings:` (plan_to_yaml) and what
// prism reads back from it (plan_from_yaml). Keys a sweep.yaml of an older Prism
// lacks are left at their defaults, so its sweep reads as it ran; keys every version
// wrote are required, and a sweep.yaml without them is reported as unreadable.
//
// The sweep file a user writes is read by parse_settings (sweep/plan.cpp) instead:
// it checks each key's range and names the file, line and key of a mistake.
#include <yaml-cpp/yaml.h>

#include "prism/sweep/plan.h"

namespace prism::settings_yaml {

// `node[key]` into `value` when the node has it (a key older versions did not write).
template <class T>
void read_optional(const YAML::Node& node, const char* key, T& value) {
  if (const YAML::Node n = node[key]) value = n.as<T>();
}

// A sequence written in flow style ([a, b]).
inline YAML::Node flow(const std::vector<std::string>& v) {
  YAML::Node n(v);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

}  // namespace prism::settings_yaml

namespace YAML {

template <>
struct convert<prism::HalvingSettings> {
  static Node encode(const prism::HalvingSettings& h) {
    Node n;
    n["enabled"] = h.enabled;
    n["eta"] = h.eta;
    n["min_steps"] = h.min_steps;
    n["keep_baseline"] = h.keep_baseline;
    n["noise_k"] = h.noise_k;
    n["rung_seeds"] = h.rung_seeds;
    n.SetStyle(EmitterStyle::Flow);
    return n;
  }
  static bool decode(const Node& n, prism::HalvingSettings& h) {
    h.enabled = n["enabled"].as<bool>();
    h.eta = n["eta"].as<int>();
    h.min_steps = n["min_steps"].as<int64_t>();
    h.keep_baseline = n["keep_baseline"].as<bool>();
    h.noise_k = 0.0;  // sweeps made before the noise rule ranked by the mean alone; they keep their decisions
    prism::settings_yaml::read_optional(n, "noise_k", h.noise_k);
    prism::settings_yaml::read_optional(n, "rung_seeds", h.rung_seeds);
    return true;
  }
};

template <>
struct convert<prism::SlurmCollect> {
  static Node encode(const prism::SlurmCollect& c) {
    Node n;
    n["partition"] = c.partition;
    n["time"] = c.time;
    n["mem"] = c.mem;
    n["cpus"] = c.cpus;
    n["extra"] = prism::settings_yaml::flow(c.extra);
    return n;
  }
  static bool decode(const Node& n, prism::SlurmCollect& c) {
    c.partition = n["partition"].as<std::string>();
    c.time = n["time"].as<std::string>();
    c.mem = n["mem"].as<std::string>();
    c.cpus = n["cpus"].as<int>();
    c.extra = n["extra"].as<std::vector<std::string>>();
    return true;
  }
};

template <>
struct convert<prism::SlurmSettings> {
  static Node encode(const prism::SlurmSettings& s) {
    Node n;
    n["partition"] = s.partition;
    n["time"] = s.time;
    n["mem"] = s.mem;
    n["account"] = s.account;
    n["cpus_per_task"] = s.cpus_per_task;
    n["max_parallel"] = s.max_parallel;
    n["max_waves"] = s.max_waves;
    n["signal_seconds"] = s.signal_seconds;
    n["max_requeues"] = s.max_requeues;
    n["extra"] = prism::settings_yaml::flow(s.extra);
    n["collect"] = s.collect;
    return n;
  }
  static bool decode(const Node& n, prism::SlurmSettings& s) {
    s.partition = n["partition"].as<std::string>();
    s.time = n["time"].as<std::string>();
    s.mem = n["mem"].as<std::string>();
    s.account = n["account"].as<std::string>();
    s.cpus_per_task = n["cpus_per_task"].as<int>();
    s.max_parallel = n["max_parallel"].as<int>();
    s.max_waves = n["max_waves"].as<int>();
    s.extra = n["extra"].as<std::vector<std::string>>();
    // Absent in sweep.yaml files of older versions: they get today's defaults.
    prism::settings_yaml::read_optional(n, "signal_seconds", s.signal_seconds);
    prism::settings_yaml::read_optional(n, "max_requeues", s.max_requeues);
    prism::settings_yaml::read_optional(n, "collect", s.collect);
    return true;
  }
};

template <>
struct convert<prism::EstimateSettings> {
  static Node encode(const prism::EstimateSettings& e) {
    Node n;
    n["tokens_per_s"] = e.tokens_per_s;
    n["peak_flops"] = e.peak_flops;
    n["mfu"] = e.mfu;
    n["device"] = e.device;
    n["source"] = e.source;
    return n;
  }
  static bool decode(const Node& n, prism::EstimateSettings& e) {
    e.tokens_per_s = n["tokens_per_s"].as<double>();
    e.peak_flops = n["peak_flops"].as<double>();
    e.mfu = n["mfu"].as<double>();
    e.device = n["device"].as<std::string>();
    e.source = n["source"].as<std::string>();
    return true;
  }
};

template <>
struct convert<prism::PowerSettings> {
  static Node encode(const prism::PowerSettings& p) {
    Node n;
    n["sd"] = p.sd;
    n["source"] = p.source;
    n["effect"] = p.effect;
    return n;
  }
  static bool decode(const Node& n, prism::PowerSettings& p) {
    p.sd = n["sd"].as<double>();
    p.source = n["source"].as<std::string>();
    p.effect = n["effect"].as<double>();
    return true;
  }
};

template <>
struct convert<prism::SequentialSettings> {
  static Node encode(const prism::SequentialSettings& q) {
    Node n;
    n["first"] = q.first;
    n["step"] = q.step;
    n["cap"] = q.cap;
    return n;
  }
  static bool decode(const Node& n, prism::SequentialSettings& q) {
    q.first = n["first"].as<int>();
    q.step = n["step"].as<int>();
    q.cap = n["cap"].as<int>();
    return true;
  }
};

// The sweep's name is not under `settings:` (sweep.yaml has it at the top).
template <>
struct convert<prism::SweepSettings> {
  static Node encode(const prism::SweepSettings& s) {
    Node n;
    n["baseline"] = s.baseline;
    n["jobs"] = s.jobs;
    n["threads"] = s.threads;
    n["timeout"] = s.timeout_s;
    n["halving"] = s.halving;
    n["slurm"] = s.slurm;
    n["estimate"] = s.estimate;
    n["power"] = s.power;
    n["sequential"] = s.sequential;
    return n;
  }
  static bool decode(const Node& n, prism::SweepSettings& s) {
    s.baseline = n["baseline"].as<bool>();
    s.jobs = n["jobs"].as<int>();
    s.threads = n["threads"].as<int>();
    s.timeout_s = n["timeout"].as<double>();
    s.halving = n["halving"].as<prism::HalvingSettings>();
    s.slurm = n["slurm"].as<prism::SlurmSettings>();
    // Absent in sweep.yaml files of older versions.
    prism::settings_yaml::read_optional(n, "estimate", s.estimate);
    prism::settings_yaml::read_optional(n, "power", s.power);
    prism::settings_yaml::read_optional(n, "sequential", s.sequential);
    return true;
  }
};

}  // namespace YAML
