#pragma once
// run_search: one weight-sharing schedule search, start to finish. The shared
// model trains as `prism train` trains a model (the same trainer: every
// attention back end, data parallelism under torchrun or srun, checkpoints and
// exact resume after a kill, run.h5 readable while it runs), with a
// ScheduleSearch riding along (schedule_search.h); once it has trained
// train.max_steps steps the space is ranked and the results written
// (results.h). Resuming a finished search ranks it again (the same ranking:
// it depends on the final weights alone).
//
// The run directory: search.yaml (the resolved search file, for --resume),
// config.yaml, run.h5 (with /search), checkpoints/, ranking.csv, top.yaml.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prism/search/ranking.h"
#include "prism/search/search_plan.h"
#include "prism/train/trainer.h"

namespace prism {

struct SearchOptions {
  std::string run_dir;
  bool resume = false;   // continue from the newest checkpoint in run_dir
  bool force = false;    // replace a run in run_dir
  std::function<void(const std::string&)> log;  // default: stdout
};

struct SearchSummary {
  TrainSummary train;              // status completed | interrupted | failed
  std::optional<Ranking> ranking;  // when completed
};

SearchSummary run_search(const SearchPlan& plan, const SearchOptions& options);

// A search's cost in model FLOPs (training 3x forward, held-out evaluation 1x,
// nanoGPT's count): training the shared model, the ranking's evaluations (as
// the plan asks for them: candidates counted before duplicates are dropped),
// fine-tuning the ranked schedules (search.finetune, counted as one search's
// work), retraining the pick from scratch with every seed of search.seeds; and the
// grid it replaces (SearchPlan::grid, each schedule with those seeds or the
// sweep section's).
struct SearchCost {
  int64_t step_tokens = 0;
  double train_flops_per_token = 0;   // a plain training step's
  double search_flops_per_token = 0;  // the search's (a mixture runs K attentions per layer)
  double exact = 0, probes = 0, progress = 0;  // evaluations: exact, probes, per-validation probes (1 batch each)
  int64_t exact_batches = 0;
  double run_flops = 0;      // one plain run of the config from scratch
  double train_flops = 0, rank_flops = 0, retrain_flops = 0;
  std::vector<FinetuneRung> finetune_rungs;  // search.finetune: how many schedules train from the shared
                                             // weights, how long (under halving, per rung); empty: none
  double finetune_flops = 0;       // their training and their final held-out evaluation
  double grid_seeds = 0, grid_flops = 0, space_flops = 0;
  double search_flops() const { return train_flops + rank_flops + finetune_flops; }
  double total() const { return search_flops() + retrain_flops; }
};
SearchCost search_cost(const SearchPlan& plan);

// What `prism search --dry-run` prints: the space, the method, the search's cost
// (training, ranking, retraining the pick with the search's seeds) next to the
// cost of the grid it replaces (every schedule of that grid trained from scratch
// with the same seeds), in FLOPs and, when search.estimate states a throughput,
// device-hours. Nothing is run.
std::string format_search_dry_run(const SearchPlan& plan, const std::string& run_dir);

}  // namespace prism
