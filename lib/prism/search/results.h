#pragma once
// What a search leaves behind once it has ranked its space:
//   - run.h5 /search/ranking: per evaluated schedule `heads` (n x L), `loss`,
//     `loss_se`, `estimate`, `hard_rules` (0/1), `guidelines` and `why` (text);
//     the per-layer `scores` (L x K) and `choices` (K) when an additive model was
//     used; attributes `decoded`, `unconstrained`, `all_rules` (compact forms),
//     `method`, `space`, `batches`, `probes`, `estimate_tau`;
//   - ranking.csv: the same table, best first;
//   - top.yaml: a sweep file that trains the best `top` schedules obeying rules
//     1-3 (and the uniform baseline) from scratch with the search's `seeds`:
//     `prism sweep RUN_DIR/top.yaml`;
//   - finetune.yaml, when search.finetune.steps > 0: a sweep file that trains
//     each of the best search.finetune.schedules ranked (all by default) for
//     that many steps from the search's final weights (train.init_from), with
//     the run's seed and recipe otherwise, to rank them again by the sweep's
//     held-out losses: `prism sweep RUN_DIR/finetune.yaml --out RUN_DIR/finetune`;
//     with search.finetune.halving, under successive halving (sweep.halving).
// Files are written whole under a temporary name, then renamed.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/search/ranking.h"
#include "prism/search/search_plan.h"
#include "prism/store/result_group.h"

namespace prism {

class RunStore;

ResultGroup ranking_group(const SearchPlan& plan, const Ranking& ranking);
std::string ranking_csv(const Ranking& ranking);
// The sweep file of the top schedules, or "" when none obeys rules 1-3.
std::string top_sweep_yaml(const SearchPlan& plan, const Ranking& ranking);

// The sweep file that fine-tunes the ranked schedules from the weights in
// `run_dir`, or "" when search.finetune.steps is 0.
std::string finetune_sweep_yaml(const SearchPlan& plan, const Ranking& ranking, const std::string& run_dir);
// The schedules finetune.yaml trains for a ranking of `ranked` schedules.
int64_t finetune_count(const FinetuneSettings& f, int64_t ranked);
// What it trains, rung by rung: every one of them `steps` steps, or under
// finetune.halving each rung's schedules (the best 1/eta of the last, rounded
// up) at its budget (FinetuneRung: search_plan.h). Empty when there is no fine-tuning.
std::vector<FinetuneRung> finetune_rungs(const FinetuneSettings& f, int64_t ranked);
// "36 schedules x 150 steps" or "36 schedules x 150 steps, then the best 12 x 450".
std::string finetune_text(const std::vector<FinetuneRung>& rungs);

// Writes them; `store` may be null (then only the files).
void write_search_results(const SearchPlan& plan, const Ranking& ranking, const std::string& run_dir, RunStore* store);

// The ranking as printed at the end of a search: the table, the decoded and
// unconstrained picks with their guidelines, and what to run next.
std::string format_ranking(const SearchPlan& plan, const Ranking& ranking, const std::string& run_dir);

}  // namespace prism
