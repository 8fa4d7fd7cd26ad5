#include "prism/search/schedule_search.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "prism/error.h"
#include "prism/search/results.h"

namespace prism {

namespace {

ScheduleLoss schedule_loss(const HeldOutLoss& loss) {
  return [&loss](const HeadSchedule& s, int64_t batches) {
    const ValRow r = loss(ForwardOptions::under(s), batches);
    return HeldOut{r.loss, r.loss_se};
  };
}

// -log p, the mixture's per-layer scores (lower is better).
LayerScores mixture_scores(const ArchitectureWeights& arch, double tau, int layers) {
  LayerScores s;
  s.layers = layers;
  s.choices = arch.choices();
  for (double p : arch.probabilities(tau)) s.score.push_back(-std::log(std::max(p, 1e-300)));
  return s;
}

}  // namespace

ScheduleSearch::ScheduleSearch(const SearchPlan& plan, std::function<void(const std::string&)> log)
    : plan_(plan), log_(std::move(log)) {}

std::string ScheduleSearch::describe() const {
  const auto& st = plan_.settings;
  const std::string how = st.method == SearchMethod::Mixture
                              ? fmt::format("mixture over head counts per layer (architecture lr {:g}, tau {:g} -> {:g}, "
                                            "moving after {:.0f}% of the run; {})",
                                            st.mixture.lr, st.mixture.tau_start, st.mixture.tau_end, 100 * st.mixture.start,
                                            mixture_paths_text(st.mixture, plan_.space.choices().size()))
                              : fmt::format("single path: one schedule sampled per micro-batch (seed {})", st.seed);
  return fmt::format("search: {} over {}; validation under {}", how, plan_.space.describe(),
                     st.method == SearchMethod::Mixture ? "the current mixture" : plan_.config.schedule.compact());
}

SearchLayout ScheduleSearch::store_layout(int64_t slots) const {
  SearchLayout l;
  l.slots = static_cast<int>(slots);
  l.layers = plan_.space.layers();
  l.choices = plan_.space.choices();
  l.method = method_name(plan_.settings.method);
  return l;
}

void ScheduleSearch::attach(GPT& model, const Execution& exec) {
  static_cast<void>(model);
  if (plan_.settings.method == SearchMethod::Mixture)
    arch_.emplace(plan_.space.layers(), plan_.space.choices(), plan_.settings.mixture, plan_.config.train.max_steps,
                  exec.device);
}

std::vector<torch::Tensor> ScheduleSearch::parameters() {
  if (arch_) return {arch_->logits()};
  return {};
}

HeadSchedule ScheduleSearch::sampled(int64_t step, int64_t slot) const {
  SplitMix rng(plan_.settings.seed, static_cast<uint64_t>(step), static_cast<uint64_t>(slot));
  return plan_.space.sample(rng);
}

ForwardOptions ScheduleSearch::micro_batch(int64_t step, int64_t slot, int64_t slots) {
  slots_ = slots;
  if (arch_) {
    // Sampled paths draw from the micro-batch's own stream (exact on resume); the full mixture draws nothing.
    SplitMix rng(plan_.settings.seed, static_cast<uint64_t>(step), static_cast<uint64_t>(slot));
    return arch_->sampled_mixture(arch_->temperature(step), rng);
  }
  return ForwardOptions::under(sampled(step, slot));
}

ForwardOptions ScheduleSearch::validation() const {
  if (!arch_) return {};
  // The mixture of the step just taken (its weights no longer need a gradient here).
  return arch_->mixture(arch_->temperature(last_step_));
}

void ScheduleSearch::after_step(int64_t step, RunStore* store) {
  last_step_ = step;
  if (arch_) arch_->update(step);
  if (!store) return;
  SearchRow row;
  row.step = step;
  const int L = plan_.space.layers();
  const size_t K = plan_.space.choices().size();
  if (arch_) {
    const double tau = arch_->temperature(step - 1);
    row.temperature = tau;
    row.weights = arch_->probabilities(tau);
    const HeadSchedule lean = mixture_scores(*arch_, tau, L).argmin();
    for (int64_t s = 0; s < slots_; ++s) row.heads.insert(row.heads.end(), lean.heads().begin(), lean.heads().end());
  } else {
    row.weights.assign(static_cast<size_t>(L) * K, std::numeric_limits<double>::quiet_NaN());
    for (int64_t s = 0; s < slots_; ++s) {
      const HeadSchedule h = sampled(step - 1, s);
      row.heads.insert(row.heads.end(), h.heads().begin(), h.heads().end());
    }
  }
  store->append_search(row);
}

std::optional<LayerScores> ScheduleSearch::layer_scores(int64_t step, const HeldOutLoss* loss) const {
  if (arch_) return mixture_scores(*arch_, arch_->temperature(step), plan_.space.layers());
  const int64_t probes = plan_.settings.rank.progress_probes;
  if (probes <= 0 || !loss) return std::nullopt;
  return probe_layer_scores(plan_.space, probes, 1, plan_.settings.seed, schedule_loss(*loss));
}

void ScheduleSearch::measure(int64_t step, const HeldOutLoss& loss, RunStore* store) {
  const auto scores = layer_scores(step, &loss);
  if (!scores || !store) return;
  SearchScoresRow row;
  row.step = step;
  row.score = scores->score;
  const HeadSchedule choice = scores->argmin();
  for (int h : choice.heads()) row.choice.push_back(h);
  store->append_search_scores(row);
}

CheckpointExtra ScheduleSearch::state() const {
  CheckpointExtra s;
  nlohmann::json j = {{"method", method_name(plan_.settings.method)}, {"seed", plan_.settings.seed},
                      {"space", plan_.space.describe()}, {"last_step", last_step_}};
  if (arch_) {
    j["paths"] = arch_->paths_run();
    CheckpointExtra a = arch_->state();
    s.tensors = std::move(a.tensors);
    j["architecture"] = a.text;
  }
  s.text = j.dump();
  return s;
}

void ScheduleSearch::restore(const CheckpointExtra& s) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(s.text);
  } catch (const std::exception& e) {
    throw Error(fmt::format("the search state is unreadable ({})", e.what()), "checkpoint", "resume from another checkpoint");
  }
  const std::string method = j.value("method", "");
  const uint64_t seed = j.value("seed", uint64_t{0});
  const std::string space = j.value("space", "");
  if (method != method_name(plan_.settings.method) || seed != plan_.settings.seed || space != plan_.space.describe())
    throw Error(fmt::format("the checkpoint is of a {} search over {} (seed {}); this one is {} over {} (seed {})", method,
                            space, seed, method_name(plan_.settings.method), plan_.space.describe(), plan_.settings.seed),
                "search state", "resume with the search file the run was started with");
  if (arch_ && j.contains("paths") && j["paths"].get<int>() != arch_->paths_run())
    throw Error(fmt::format("the checkpoint's mixture ran {} counts per layer and micro-batch; this one runs {}",
                            j["paths"].get<int>(), arch_->paths_run()),
                "search state", "resume with the search file the run was started with (search.mixture.paths)");
  last_step_ = j.value("last_step", int64_t{0});
  if (arch_) arch_->restore({s.tensors, j.value("architecture", std::string("0"))});
}

void ScheduleSearch::finish(const HeldOutLoss& loss, RunStore* store, const std::string& run_dir, bool root) {
  std::optional<LayerScores> prior;
  if (arch_) prior = mixture_scores(*arch_, plan_.settings.mixture.tau_end, plan_.space.layers());
  auto quiet = [](const std::string&) {};
  ranking_ = rank_space(plan_.space, plan_.settings.rank, schedule_loss(loss), prior, plan_.config.model.d_model,
                        plan_.config.rules, root ? log_ : quiet);
  if (!root) return;
  write_search_results(plan_, *ranking_, run_dir, store);
  log_(format_ranking(plan_, *ranking_, run_dir));
}

}  // namespace prism
