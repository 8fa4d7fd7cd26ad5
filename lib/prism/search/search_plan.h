#pragma once
// SearchPlan: a search file read. A search file is a config (composed like any
// other: defaults, overrides, ${...}) with one more section, `search:`, naming
// the space of schedules, the method and the ranking:
//
// A search file may build on a sweep file (defaults: [../study/gpt2-124m]): the
// sweep's config is the shared model's, and its `sweep:` section, no part of the
// run, names the grid the search stands in for (--dry-run's comparison).
//
//   search:
//     name: cpu-128-heads          # folder name (default: the file's stem)
//     method: spos                 # spos: one schedule sampled per micro-batch (single-path one-shot)
//                                  # mixture: every count per layer, weighted by learned, annealed weights
//     space:                       # exactly one of:
//       heads: [1, 2, 4, 8, 16]    #   any of these counts in any layer (a product space), with
//       hard_rules: false          #   true: only non-decreasing schedules ending at model.n_head
//       # enumerate: {head_dims: [128, 64], block: [2, 3], baseline_share: 0.5}   # the grid a sweep trains
//       # schedules: [[1, 1, 4, 4, 4, 4], "2x2,4x4"]                              # a list
//     seed: 0                      # the sampler's and the probes' (default: train.seed)
//     mixture: {lr: 5e-3, tau: [1.0, 0.05], start: 0.1, paths: 0}   # paths: counts run per layer and
//                                  #   training micro-batch (0: all; 2: two sampled from p, ProxylessNAS-style)
//     rank:
//       batches: 8                 # held-out batches per exact evaluation (0: train.eval_tokens' worth)
//       exact_limit: 64            # spaces up to this size are evaluated whole
//       probes: 0                  # larger spaces: random schedules fitted for per-layer scores (0: 4x their count)
//       probe_batches: 2
//       candidates: 8              # best by estimate evaluated exactly (under rules 1-3, and unconstrained)
//       schedules: []              # always evaluated exactly (e.g. a ground truth's)
//       progress_probes: 0         # spos: per-layer scores at every validation (0: none)
//     finetune: {steps: 150, lr: 2e-3, warmup_steps: 15, schedules: 0}  # finetune.yaml: a sweep that trains
//                                  #   each of the best `schedules` ranked (0: all) `steps` steps from the shared
//                                  #   weights, to rank them again (steps 0, the default: no such file)
//       halving: {eta: 3, min_steps: 150}  # optional: successive halving in that sweep; every schedule trains
//                                  #   min_steps, the best 1/eta go on to eta times more, ... up to `steps`
//     top: 5                       # schedules written to top.yaml, a sweep file that trains them from scratch
//     seeds: [0, 1, 2]             # with these seeds
//     estimate: {peak_flops: 989e12, mfu: 0.4, device: "1x H100", source: "..."}  # --dry-run's device-hours
//
// The rest of the file is the run's config: the model, data and training the
// shared model gets (its `schedule:` is the one validation passes run under
// in a sampled search, and its rules grade the ranking's guidelines 4-6).
// Errors are prism::Error naming the file and key.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/config/config.h"
#include "prism/search/architecture.h"
#include "prism/search/ranking.h"
#include "prism/search/space.h"
#include "prism/sweep/plan.h"

namespace prism {

enum class SearchMethod { SinglePath, Mixture };
const char* method_name(SearchMethod m);  // "spos" | "mixture"
// mixture_paths (architecture.h) in words: "2 of the 5 counts per layer sampled per micro-batch".
std::string mixture_paths_text(const MixtureSettings& m, size_t choices);

// A second ranking: each schedule trained briefly from the shared weights
// (train.init_from), with the run's recipe on the first `steps` steps of its data.
struct FinetuneSettings {
  int64_t steps = 0;           // 0: none
  double lr = 0;               // 0: train.lr
  int64_t warmup_steps = -1;   // -1: steps / 10
  int64_t schedules = 0;       // the best this many of the ranking (0: every one ranked)
  // Successive halving over them (sweep/halving.h; one seed, so the plain best 1/eta
  // go on): `steps` is the last rung's budget, halving.min_steps the first's.
  HalvingSettings halving;
};
// One rung of that fine-tuning: how many schedules train how many steps (results.h: finetune_rungs).
struct FinetuneRung {
  int64_t schedules = 0;
  int64_t steps = 0;
};

struct SearchSettings {
  std::string name;
  SearchMethod method = SearchMethod::SinglePath;
  uint64_t seed = 0;
  MixtureSettings mixture;
  RankSettings rank;
  FinetuneSettings finetune;
  int top = 5;
  std::vector<uint64_t> seeds{0};
  EstimateSettings estimate;
  std::string space_text;        // the space as written, for messages
};

struct SearchPlan {
  std::string source;            // the search file
  std::vector<std::string> overrides;
  Config config;                 // the shared model's run (the file without `search:`)
  SearchSettings settings;
  ScheduleSpace space;
  // The grid this search stands in for (--dry-run's comparison): the schedule
  // axes of the `sweep:` section of a sweep file the search file builds on (its
  // defaults), with that section's number of seeds; else the space itself when
  // it is a list; else the progressive schedules the enumerator gives for this
  // shape under the config's rules. Either way each with the search's seeds
  // unless the sweep section names its own.
  std::vector<HeadSchedule> grid;
  size_t grid_seeds = 0;         // 0: the search's seeds
  std::string grid_source;
  std::string file_text;         // the composed search file (overrides applied), as YAML
};

// Composes the search file with `overrides` and reads it.
SearchPlan plan_search(const std::string& path, const std::vector<std::string>& overrides = {});

// The config a search run stores (config.yaml): the resolved run config with the
// `search:` section as read, so --resume needs nothing else.
std::string search_config_yaml(const SearchPlan& plan);
// Reads a run directory's config.yaml back into a plan, with new overrides.
SearchPlan plan_from_run(const std::string& run_dir, const std::vector<std::string>& overrides);

}  // namespace prism
