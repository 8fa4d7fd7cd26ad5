#pragma once
// `prism export`: tidy tables from runs and sweeps.
//   loss      one row per training step       run, heads, seed, step, tokens, loss, lr, grad_norm, time_s
//   val       one row per validation point    run, heads, seed, step, tokens, loss, loss_se, unigram_val_loss
//   distance  one row per (measurement, layer, head): training-time rows
//             (source=train) and the held-out profile (source=heldout, with d / i)
//   position  one row per (layer, head, query-position bin) of the held-out profile
//   delta     one row per layer: Delta D_l with its intervals (and of d / i)
//   eval      one row per task                run, heads, seed, task, acc, acc_norm, n, stderrs, acc_bytes
//   summary   one row per run (final val loss with its SE and the unigram
//             baseline, and the sweep's summary.csv columns)
#include <string>
#include <vector>

#include "prism/analysis/run_set.h"
#include "prism/store/table.h"

namespace prism {

enum class ExportWhat { Loss, Val, Distance, Position, Delta, Eval, Summary, LossByPosition };

ExportWhat parse_export_what(const std::string& name);  // throws prism::Error listing the names
const std::vector<std::string>& export_what_names();

struct ExportOptions {
  // delta: the baseline runs; the runs of the RunSet are then the Prism side.
  // Without it, a sweep pairs each schedule with the uniform runs of the same
  // grid values, and single runs give their stored /attention/delta.
  std::vector<std::string> baseline;
  double confidence = 0.95;
};

Table export_table(const RunSet& runs, ExportWhat what, const ExportOptions& options = {});

// "2,4" for heads [2, 4]: a schedule as one cell.
std::string heads_cell(const std::vector<int>& heads);

}  // namespace prism
