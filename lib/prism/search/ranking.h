#pragma once
// Ranking a schedule space from one shared model. Every loss here is the
// shared weights' held-out loss under a schedule, on the same fixed held-out
// batches for all schedules (paired: the differences are what count).
//   - A space of at most `exact_limit` schedules: every one evaluated exactly.
//   - A larger one (a product space runs to thousands): per-layer additive
//     scores (layer_scores.h) estimate every schedule. A sampled search fits them
//     to `probes` random schedules evaluated on `probe_batches` batches; a
//     mixture search has them from its architecture weights (-log p). The
//     `candidates` best by estimate, under rules 1-3 and unconstrained (dynamic
//     programming), are then evaluated exactly.
//   - `schedules` (e.g. a ground truth's) are always evaluated exactly.
// The ranking lists the exactly evaluated schedules by loss, best first. The
// decoded pick is the best of them under rules 1-3; the unconstrained pick the
// best of all; guidelines 4-6 are reported for each.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "prism/schedule/head_schedule.h"
#include "prism/schedule/rules.h"
#include "prism/search/layer_scores.h"
#include "prism/search/space.h"

namespace prism {

struct RankSettings {
  int64_t batches = 8;           // held-out batches per exact evaluation (0: the whole validation set)
  int64_t exact_limit = 64;      // spaces up to this size are evaluated whole
  int64_t probes = 0;            // schedules fitted for per-layer scores (0: 4x the scores' parameters)
  int64_t probe_batches = 2;
  int64_t candidates = 8;        // best by estimate evaluated exactly, under rules 1-3 and unconstrained each
  std::vector<HeadSchedule> schedules;  // always evaluated exactly
  int64_t progress_probes = 0;   // per-layer scores during training: probes at the validation cadence (0: none)
  uint64_t seed = 0;             // draws the probes
};

// A schedule's held-out loss (mean over `batches` batches) and its standard error.
struct HeldOut {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double se = std::numeric_limits<double>::quiet_NaN();
};
using ScheduleLoss = std::function<HeldOut(const HeadSchedule& schedule, int64_t batches)>;

struct RankedSchedule {
  HeadSchedule schedule;
  double loss = std::numeric_limits<double>::quiet_NaN();      // exact, shared weights
  double loss_se = std::numeric_limits<double>::quiet_NaN();
  double estimate = std::numeric_limits<double>::quiet_NaN();  // additive estimate (NaN: none)
  bool hard_rules = false;       // rules 1-3 hold (rule 1 always does here)
  std::vector<RuleFinding> guidelines;  // findings of rules 4-6
  std::string why;               // listed | space | top (rules 1-3) | top (unconstrained)
};

struct Ranking {
  std::vector<RankedSchedule> ranked;     // exactly evaluated, best first
  std::optional<LayerScores> scores;      // the additive model, when one was used
  int64_t probes = 0, probe_batches = 0;  // what the scores were fitted to
  int64_t batches = 0;                    // held-out batches per exact evaluation
  double space_size = 0;
  // Indices into `ranked`: the best under rules 1-3 (-1: none evaluated), the best overall,
  // and the best that also follows guidelines 4-6 (-1: none).
  int decoded = -1, unconstrained = -1, all_rules = -1;
  // Kendall's tau-b between estimate and exact loss over the exactly evaluated (NaN: no estimate).
  double estimate_tau = std::numeric_limits<double>::quiet_NaN();
};

// Ranks `space` for a model of `n_layer` x `d_model` with baseline `h_base`,
// evaluating with `loss`. `prior`: per-layer scores the method learned (a
// mixture's); without it, a large space is probed. `rules` give guidelines 4-6.
Ranking rank_space(const ScheduleSpace& space, const RankSettings& settings, const ScheduleLoss& loss,
                   const std::optional<LayerScores>& prior, int d_model, const ScheduleRules& rules,
                   const std::function<void(const std::string&)>& log);

// Per-layer scores from `probes` random schedules of `space` on `batches` batches.
LayerScores probe_layer_scores(const ScheduleSpace& space, int64_t probes, int64_t batches, uint64_t seed,
                               const ScheduleLoss& loss);

// The probes a space needs for well-determined per-layer scores: 4x the parameters.
int64_t default_probes(const ScheduleSpace& space);

}  // namespace prism
