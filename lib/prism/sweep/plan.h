#pragma once
// SweepPlan: a sweep file expanded into its trials. A sweep file is a config
// (composed like any other: defaults, overrides, ${...}) with one more section,
// `sweep:`, that names the search space and how to run it:
//
//   sweep:
//     grid:                          # axes; the schedule axes expand per grid point
//       schedule.enumerate: {head_dims: [64], block: [2, 3], baseline_share: 0.5}
//       schedule.heads: [[1, 1, 4, 4, 4, 4]]   # explicit schedules (any compact form)
//       train.seed: [0, 1]
//     baseline: true                 # add the uniform schedule (default true)
//     jobs: 2                        # trials at once on this machine (--jobs)
//     threads: 0                     # threads shared by concurrent trials (0 = every core)
//     timeout: 600                   # seconds per trial run, 0 = none (--timeout)
//     halving: {eta: 3, min_steps: 20, keep_baseline: true}
//     slurm: {partition: cpu, time: "02:00:00", mem: 8G, cpus_per_task: 4}
//     estimate: {peak_flops: 989e12, mfu: 0.4, device: "1x H100", source: "..."}  # --dry-run cost
//
// The schedule axes use the config's schedule grammar (config/schedule_section.h);
// a trial's schedule stands in for the form its config's `schedule:` section
// gives, under that section's rules. Every trial's config is composed and
// validated before anything runs, so a schedule invalid for the model or a bad
// value fails the whole sweep up front.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "prism/launch/slurm.h"
#include "prism/schedule/head_schedule.h"

namespace prism {

struct HalvingSettings {
  bool enabled = false;
  int eta = 3;                 // keep the best 1/eta of the configurations at each rung
  int64_t min_steps = 0;       // the first rung's budget; 0 = max_steps / eta^2 (three rungs)
  bool keep_baseline = true;   // always promote the uniform baseline (the table compares to it)
  // Also promote every configuration within noise_k standard errors of the best
  // (halving.h: a difference the seeds cannot resolve is no reason to stop a
  // configuration). 0: rank by the mean alone.
  double noise_k = 2.0;
  // Seeds per configuration in the rungs before the last: the lowest rung_seeds
  // of the grid's seeds (paired across configurations); the last rung runs every
  // seed, so its comparison has the study's full power. 0: every seed everywhere.
  int rung_seeds = 0;
};

// What a dry run states about cost: training FLOPs come from the cost model;
// device-hours need a throughput, which the sweep file states with its source.
struct EstimateSettings {
  double tokens_per_s = 0;     // training tokens/s of one device for this model, or
  double peak_flops = 0;       // the device's peak FLOP/s (bf16 dense) and
  double mfu = 0;              // the model FLOPs utilisation assumed; neither: FLOPs only
  std::string device;          // e.g. "1x H100 80GB"
  std::string source;          // where the throughput comes from
};

class ConfigNode;
// An `estimate:` section (sweep.estimate, search.estimate).
EstimateSettings parse_estimate_section(ConfigNode section);

// What a dry run plans seeds with (sweep.power): the sd of Prism - uniform paired by seed,
// stated with where it comes from (or measured from a pilot sweep: --pilot DIR), and the
// effect the study must detect (0: the paper's at the model's scale, paper_effect).
struct PowerSettings {
  double sd = 0;               // nats; 0: none stated
  std::string source;          // where the sd comes from (required with sd)
  double effect = 0;           // nats; 0: the paper's effect at this scale
};

// Seeds until resolved (sweep.sequential; prism report --sequential): looks after `first`
// seed pairs, then every `step` more, up to `cap` (stats/sequential.h). 0: none.
struct SequentialSettings {
  int first = 0;
  int step = 0;
  int cap = 0;
};

struct SweepSettings {
  std::string name;            // default: the sweep file's stem
  bool baseline = true;
  int jobs = 1;
  int threads = 0;
  double timeout_s = 0;
  HalvingSettings halving;
  SlurmSettings slurm;
  EstimateSettings estimate;
  PowerSettings power;
  SequentialSettings sequential;
};

struct Trial {
  int index = 0;               // position in the sweep (also the Slurm array index)
  std::string name;            // folder name, e.g. "h1x2-4x4_lr6e-4_seed1"
  std::string group;           // the configuration across seeds: the name without its seed
  HeadSchedule schedule;
  bool baseline = false;       // the uniform schedule of its model
  uint64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> params;  // non-schedule grid values (key, value)
  std::string config;          // the resolved config (to_yaml), what `prism train` runs
  int64_t max_steps = 0;
  int64_t step_tokens = 0;     // tokens per optimizer step
};

struct SweepPlan {
  std::string source;                  // the sweep file
  std::vector<std::string> overrides;  // command-line overrides it was composed with
  SweepSettings settings;
  std::vector<std::string> axes;       // grid keys, schedule axes first
  std::vector<Trial> trials;

  // What the results depend on (every trial's name and config, the halving
  // rule): two plans with the same definition can share a sweep directory.
  std::string definition() const;
  const Trial& trial(const std::string& name) const;
};

// Composes the sweep file with `overrides` and expands its grid.
SweepPlan plan_sweep(const std::string& path, const std::vector<std::string>& overrides = {});

// sweep.yaml: the resolved plan, enough to run any trial without the sweep file.
std::string plan_to_yaml(const SweepPlan& plan);
SweepPlan plan_from_yaml(const std::string& path);

// A schedule's label in names and tables: "uniform" or its compact form.
std::string schedule_label(const Trial& t);

// A trial's config, parsed, with its vocabulary taken from the data where that is
// reachable (resolve_vocabulary: the stored config keeps `vocab_size: auto`), for
// the figures that depend on it (parameters, FLOPs, cost).
struct Config;
Config trial_config(const Trial& t);

}  // namespace prism
