#pragma once
// LayerScores: an additive model of a schedule's loss, one score per layer and
// head count (lower is better): estimate(s) = intercept + sum_l score[l][s_l].
// It ranks spaces too large to evaluate one by one, and decodes the best
// schedules exactly by dynamic programming over layers:
//   - under the paper's hard rules (1: every count is a choice, all of which
//     divide d_model; 2: non-decreasing; 3: the last layer at the baseline),
//     the states are (layer, count) and a layer may only follow a smaller or
//     equal count, the last state being the baseline's;
//   - unconstrained, any count follows any.
// The k best come from keeping the k best partial sums per state (k-best
// Viterbi), so the list is exact, not a beam.
#include <string>
#include <utility>
#include <vector>

#include "prism/schedule/head_schedule.h"
#include "prism/search/space.h"

namespace prism {

struct LayerScores {
  int layers = 0;
  std::vector<int> choices;
  std::vector<double> score;  // layers x choices, row-major; +inf: never choose
  double intercept = 0;

  double at(int layer, int choice) const { return score[static_cast<size_t>(layer) * choices.size() + static_cast<size_t>(choice)]; }
  // intercept + the scores of s's counts; +inf when a count is not a choice.
  double estimate(const HeadSchedule& s) const;
  // Each layer's best count (ties: the fewer heads).
  HeadSchedule argmin() const;
};

// Least-squares main effects of (schedule, loss) observations: one-hot columns
// per layer and choice, each layer's scores centred to mean zero over the
// choices it was seen with. A choice never observed in a layer scores +inf.
// Throws prism::Error with fewer observations than free parameters.
LayerScores fit_layer_scores(const std::vector<std::pair<HeadSchedule, double>>& observations, int layers,
                             const std::vector<int>& choices);

// The `k` best schedules of `space` by the scores, best first: by dynamic
// programming over layers for a product space (under the hard rules when
// `hard_rules`, or when the space has them), by sorting for a list.
std::vector<HeadSchedule> best_schedules(const LayerScores& scores, const ScheduleSpace& space, size_t k,
                                         bool hard_rules);

}  // namespace prism
