#pragma once
// ScheduleSearch: a weight-sharing schedule search as a training extension
// (train/training_extension.h). One model trains under every schedule of the
// space, then the space is ranked from it (ranking.h). Two methods:
//   - spos (single-path one-shot, Guo et al. 2020): every micro-batch runs one
//     schedule drawn uniformly from the space, a pure function of (seed, step,
//     slot), so resume and data parallelism need no sampler state and make the
//     same draws. Costs what plain training costs.
//   - mixture (DARTS-like, Liu et al. 2019; architecture.h): every layer runs
//     every candidate count, weighted by learned weights annealed to one count.
//     Costs one attention per candidate count per layer.
// Validation (/val) runs under the config's schedule (spos) or the current
// mixture. Per step, run.h5 gets the schedules each micro-batch ran with and the
// architecture weights (/search); at each validation, per-layer scores; at the
// end, the ranking (/search/ranking), and the run directory ranking.csv and
// top.yaml (results.h).
#include <functional>
#include <optional>
#include <string>

#include "prism/search/architecture.h"
#include "prism/search/ranking.h"
#include "prism/search/search_plan.h"
#include "prism/train/training_extension.h"

namespace prism {

class ScheduleSearch : public TrainingExtension {
 public:
  // `plan` outlives the search; `log` gets its lines (rank 0's).
  ScheduleSearch(const SearchPlan& plan, std::function<void(const std::string&)> log);

  std::string describe() const override;
  SearchLayout store_layout(int64_t slots) const override;
  void attach(GPT& model, const Execution& exec) override;
  std::vector<torch::Tensor> parameters() override;
  ForwardOptions micro_batch(int64_t step, int64_t slot, int64_t slots) override;
  ForwardOptions validation() const override;
  void after_step(int64_t step, RunStore* store) override;
  void measure(int64_t step, const HeldOutLoss& loss, RunStore* store) override;
  CheckpointExtra state() const override;
  void restore(const CheckpointExtra& state) override;
  void finish(const HeldOutLoss& loss, RunStore* store, const std::string& run_dir, bool root) override;

  // The schedule micro-batch `slot` of step `step` (0-based) runs with in a sampled search.
  HeadSchedule sampled(int64_t step, int64_t slot) const;
  // After finish(): the ranking.
  const std::optional<Ranking>& ranking() const { return ranking_; }
  // The per-layer scores the method has now: -log p of the mixture at step `step`'s
  // temperature, or (spos) per-layer scores probed with `loss` (nullopt without probes).
  std::optional<LayerScores> layer_scores(int64_t step, const HeldOutLoss* loss) const;

 private:
  const SearchPlan& plan_;
  std::function<void(const std::string&)> log_;
  std::optional<ArchitectureWeights> arch_;
  int64_t slots_ = 1;
  int64_t last_step_ = 0;  // optimizer steps done
  std::optional<Ranking> ranking_;
};

}  // namespace prism
