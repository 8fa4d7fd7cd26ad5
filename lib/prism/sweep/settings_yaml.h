#pragma once
// A sweep's settings as YAML, both ways (yaml-cpp's convert<>): what sweep.yaml
// records under `settings:` (plan_to_yaml) and what prism reads back from it
// (plan_from_yaml). Each settings type lists its keys once (`keys` below), in the
// order sweep.yaml has them; one walk of that list writes them, another reads them.
// Keys a sweep.yaml of an older Prism lacks are marked optional and keep their
// defaults (or the value the older file meant), so its sweep reads as it ran; the
// others are required, and a sweep.yaml without them is reported as unreadable.
//
// The sweep file a user writes is read by parse_settings (sweep/plan.cpp) instead:
// it checks each key's range and names the file, line and key of a mistake.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "prism/sweep/plan.h"

namespace prism::settings_yaml {

// Writes each key into a mapping; lists in flow style ([a, b]).
struct Writer {
  YAML::Node& node;
  template <class T>
  void operator()(const char* key, const T& value) {
    node[key] = value;
  }
  void operator()(const char* key, const std::vector<std::string>& value) {
    YAML::Node list(value);
    list.SetStyle(YAML::EmitterStyle::Flow);
    node[key] = list;
  }
  template <class T>
  void optional(const char* key, const T& value) {
    (*this)(key, value);
  }
  template <class T>
  void optional(const char* key, const T& value, const T& /*absent*/) {
    (*this)(key, value);
  }
};

// Reads each key from a mapping: a required one must be there (yaml-cpp throws);
// an optional one that is missing keeps the value it has, or takes `absent`.
struct Reader {
  const YAML::Node& node;
  template <class T>
  void operator()(const char* key, T& value) {
    value = node[key].as<T>();
  }
  template <class T>
  void optional(const char* key, T& value) {
    if (const YAML::Node n = node[key]) value = n.as<T>();
  }
  template <class T>
  void optional(const char* key, T& value, const T& absent) {
    value = absent;
    optional(key, value);
  }
};

template <class Io>
void keys(Io& io, HalvingSettings& h) {
  io("enabled", h.enabled);
  io("eta", h.eta);
  io("min_steps", h.min_steps);
  io("keep_baseline", h.keep_baseline);
  io.optional("noise_k", h.noise_k, 0.0);  // sweeps made before the noise rule ranked by the mean alone
  io.optional("rung_seeds", h.rung_seeds);
}

template <class Io>
void keys(Io& io, SlurmCollect& c) {
  io("partition", c.partition);
  io("time", c.time);
  io("mem", c.mem);
  io("cpus", c.cpus);
  io("extra", c.extra);
}

template <class Io>
void keys(Io& io, SlurmSettings& s) {
  io("partition", s.partition);
  io("time", s.time);
  io("mem", s.mem);
  io("account", s.account);
  io("cpus_per_task", s.cpus_per_task);
  io("max_parallel", s.max_parallel);
  io("max_waves", s.max_waves);
  io.optional("signal_seconds", s.signal_seconds);  // the time-limit warning and requeue came later
  io.optional("max_requeues", s.max_requeues);
  io("extra", s.extra);
  io.optional("collect", s.collect);
}

template <class Io>
void keys(Io& io, EstimateSettings& e) {
  io("tokens_per_s", e.tokens_per_s);
  io("peak_flops", e.peak_flops);
  io("mfu", e.mfu);
  io("device", e.device);
  io("source", e.source);
}

template <class Io>
void keys(Io& io, PowerSettings& p) {
  io("sd", p.sd);
  io("source", p.source);
  io("effect", p.effect);
}

template <class Io>
void keys(Io& io, SequentialSettings& q) {
  io("first", q.first);
  io("step", q.step);
  io("cap", q.cap);
}

// The sweep's name is not under `settings:` (sweep.yaml has it at the top).
template <class Io>
void keys(Io& io, SweepSettings& s) {
  io("baseline", s.baseline);
  io("jobs", s.jobs);
  io("threads", s.threads);
  io("timeout", s.timeout_s);
  io("halving", s.halving);
  io("slurm", s.slurm);
  io.optional("estimate", s.estimate);  // sections later versions added
  io.optional("power", s.power);
  io.optional("sequential", s.sequential);
}

// convert<T> for a type with `keys`; `flow` writes its mapping on one line.
template <class T, bool flow = false>
struct Convert {
  static YAML::Node encode(T value) {  // a copy: `keys` takes the fields by reference for both walks
    YAML::Node node;
    Writer w{node};
    keys(w, value);
    if (flow) node.SetStyle(YAML::EmitterStyle::Flow);
    return node;
  }
  static bool decode(const YAML::Node& node, T& value) {
    Reader r{node};
    keys(r, value);
    return true;
  }
};

}  // namespace prism::settings_yaml

namespace YAML {
template <>
struct convert<prism::HalvingSettings> : prism::settings_yaml::Convert<prism::HalvingSettings, true> {};
template <>
struct convert<prism::SlurmCollect> : prism::settings_yaml::Convert<prism::SlurmCollect> {};
template <>
struct convert<prism::SlurmSettings> : prism::settings_yaml::Convert<prism::SlurmSettings> {};
template <>
struct convert<prism::EstimateSettings> : prism::settings_yaml::Convert<prism::EstimateSettings> {};
template <>
struct convert<prism::PowerSettings> : prism::settings_yaml::Convert<prism::PowerSettings> {};
template <>
struct convert<prism::SequentialSettings> : prism::settings_yaml::Convert<prism::SequentialSettings> {};
template <>
struct convert<prism::SweepSettings> : prism::settings_yaml::Convert<prism::SweepSettings> {};
}  // namespace YAML
