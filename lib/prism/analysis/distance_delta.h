#pragma once
// Delta D_l = D_l(Prism) - D_l(baseline) on the same held-out tokens (PAPER.md:
// early wide-head layers attend more locally, middle layers peak). With several
// runs per side (seeds), each side is their mean. Two intervals per layer:
//  - over batches: the paired per-batch differences (the runs read the same
//    batches), a t-interval of their mean: how precisely these trained models'
//    difference is measured on the held-out tokens. It says nothing about the
//    schedule: another seed gives other models;
//  - over seeds: whether the difference is the schedule's rather than the
//    initialisation's. Paired by seed (the same seed gives both schedules the
//    same initial weights and data order) when every run's seed is known, no
//    seed repeats on a side and at least 2 seeds pair up: a t-interval of the
//    per-seed differences of D_l (over the paired seeds only); else Welch's
//    interval of the per-run D_l when each side has >= 2 runs; else none.
//    With its two-sided p-value (paired t-test or Welch's), nominal: a report
//    that shows many of them adjusts them together (stats.h, holm_adjust).
// The same for the position-normalised distance (d / i, distance_profile.h)
// when every profile has it; NaN otherwise.
#include <string>
#include <vector>

#include "prism/analysis/distance_profile.h"
#include "prism/stats/stats.h"
#include "prism/store/result_group.h"

namespace prism {

struct DeltaRow {
  int layer = 0;
  int heads = 0, baseline_heads = 0;
  double prism = 0, baseline = 0, delta = 0;  // D_l of each side and their difference
  Interval batch_ci{}, seed_ci{};
  double seed_p = 0;                          // two-sided p of the seed test (NaN: none)
  double prism_normalized = 0, baseline_normalized = 0, delta_normalized = 0;  // the same for d / i (NaN: not measured)
  Interval batch_ci_normalized{}, seed_ci_normalized{};
  double seed_p_normalized = 0;
};

struct DistanceDelta {
  std::vector<DeltaRow> rows;
  std::vector<int> heads, baseline_heads;
  std::vector<int64_t> bin_edges;
  std::vector<std::vector<double>> by_position;  // [layer][bin]: Delta per query-position bin
  double confidence = 0.95;
  int64_t batches = 0;
  std::string seed_method;        // "paired" (by seed), "welch", or "" (no seed interval)
  int seed_pairs = 0;             // seeds paired (seed_method "paired")
  std::string tokens_id;
  std::vector<std::string> prism_runs, baseline_runs;
};

// Throws prism::Error when a side is empty, the sides differ in depth, the runs
// were measured on different tokens, or one side mixes schedules.
DistanceDelta distance_delta(const std::vector<DistanceProfile>& prism, const std::vector<DistanceProfile>& baseline,
                             double confidence);

// /attention/delta layout (docs/analysis.md) and back.
ResultGroup to_result_group(const DistanceDelta& d);
DistanceDelta delta_from_group(const ResultGroup& g, const std::string& where);

std::string format_delta_table(const DistanceDelta& d, int d_model);

}  // namespace prism
