#include "prism/analysis/study_runs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "prism/analysis/run_unigram.h"
#include "prism/config/config.h"
#include "prism/error.h"
#include "prism/schedule/cost.h"
#include "prism/store/run_reader.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/post_trial.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The seed is a grid axis like any other in sweep.yaml (params), but a configuration pools its seeds.
bool is_seed_key(const std::string& key) { return key == "train.seed"; }

std::vector<StudyEval> read_evals(const RunReader& r) {
  std::vector<StudyEval> out;
  for (const auto& e : r.eval()) {
    auto scalar = [&](const char* name) { return e.values.has(name) ? e.values.reals(name, r.path()).at(0) : kNaN; };
    StudyEval s;
    s.task = e.task;
    s.acc = scalar("acc");
    s.acc_norm = scalar("acc_norm");
    s.acc_stderr = scalar("acc_stderr");
    s.acc_norm_stderr = scalar("acc_norm_stderr");
    s.n = e.values.has("n") ? e.values.integers("n", r.path()).at(0) : 0;
    out.push_back(s);
  }
  return out;
}

StudyRun read_run(const Trial& t, const std::string& sweep, const std::string& run_dir) {
  RunReader r(run_dir);
  StudyRun s;
  s.name = t.name;
  s.sweep = sweep;
  s.run_dir = run_dir;
  s.heads = r.attributes().heads;
  s.uniform = t.baseline;
  s.seed = t.seed;
  std::vector<std::string> p;
  for (const auto& [k, v] : t.params)
    if (!is_seed_key(k)) p.push_back(k + "=" + v);
  s.params = fmt::format("{}", fmt::join(p, ", "));
  s.max_steps = t.max_steps;
  s.val = r.val();
  const auto train = r.train();
  if (!train.empty()) {
    s.steps = train.back().step;
    s.tokens = train.back().tokens;
    s.train_time_s = train.back().time_s;
  }
  s.unigram = run_unigram_val_loss(r.attributes());
  s.evals = read_evals(r);
  if (r.has_group("attention/heldout")) s.profile = read_profile(r, false);
  if (s.profile) s.profile->source = t.name;
  return s;
}

struct Shape {
  std::string label;
  int n_layer, d_model, n_head;
  int64_t parameters;
};

Shape shape_of(const Trial& t) {
  const Config c = parse_config(YAML::Load(t.config), "trial " + t.name);
  Shape s{c.model.preset.empty() ? fmt::format("{} x {}", c.model.n_layer, c.model.d_model) : c.model.preset,
          c.model.n_layer, c.model.d_model, c.model.n_head, model_cost(c.model, c.schedule).params};
  return s;
}

}  // namespace

double StudyRun::final_val() const { return val.empty() ? kNaN : val.back().loss; }
double StudyRun::final_val_se() const { return val.empty() ? kNaN : val.back().loss_se; }
double StudyRun::tokens_per_s() const { return train_time_s > 0 ? static_cast<double>(tokens) / train_time_s : kNaN; }

std::string StudyConfig::label() const { return params.empty() ? schedule : schedule + " (" + params + ")"; }

const StudyConfig* StudyScale::baseline_of(const StudyConfig& c) const {
  for (const auto& b : configs)
    if (b.uniform && b.params == c.params) return &b;
  return nullptr;
}

Study load_study(const std::vector<std::string>& sweep_dirs) {
  if (sweep_dirs.empty())
    throw Error("no sweep directories given", "prism report", "pass the study's sweep directories");
  Study study;
  study.sweeps = sweep_dirs;
  std::vector<Shape> shapes;  // per run
  std::map<std::string, std::string> seen;  // configuration and seed -> the sweep that gave it
  // Runs are kept in a vector that grows; configs point into it once it is complete.
  for (const auto& dir : sweep_dirs) {
    const fs::path yaml = fs::path(dir) / "sweep.yaml";
    if (!fs::exists(yaml))
      throw Error("not a sweep directory (no sweep.yaml)", dir, "pass directories that prism sweep made");
    const SweepPlan plan = plan_from_yaml(yaml.string());
    std::vector<std::string> unfinished;
    for (const auto& t : plan.trials) {
      if (!final_run_completed(plan, dir, t)) {
        unfinished.push_back(t.name);
        continue;
      }
      Shape shape = shape_of(t);
      std::string params;
      for (const auto& [k, v] : t.params)
        if (!is_seed_key(k)) params += k + "=" + v + ";";
      const std::string id = fmt::format("{}|{}|{}|{}", shape.label, t.schedule.list(), params, t.seed);
      if (seen.count(id)) {
        study.notes.push_back(fmt::format("{}: {} (seed {}) is already in {}; the first is kept", dir, t.name, t.seed,
                                          seen[id]));
        continue;
      }
      seen[id] = dir;
      study.runs.push_back(read_run(t, dir, final_run_dir(plan, dir, t)));
      shapes.push_back(shape);
    }
    if (!unfinished.empty()) {
      const size_t shown = std::min<size_t>(unfinished.size(), 6);
      study.notes.push_back(fmt::format(
          "{}: {} of {} trials have no completed full-budget run (stopped by successive halving, or not finished): "
          "{}{}",
          dir, unfinished.size(), plan.trials.size(),
          fmt::join(std::vector<std::string>(unfinished.begin(), unfinished.begin() + static_cast<long>(shown)), ", "),
          shown < unfinished.size() ? ", ..." : ""));
    }
  }
  if (study.runs.empty())
    throw Error("no trial of these sweeps has completed its full budget", sweep_dirs.front(),
                "run the sweeps to the end first (prism sweep DIR)");
  for (size_t i = 0; i < study.runs.size(); ++i) {
    const StudyRun& run = study.runs[i];
    const Shape& sh = shapes[i];
    auto sc = std::find_if(study.scales.begin(), study.scales.end(), [&](const StudyScale& s) {
      return s.label == sh.label && s.n_layer == sh.n_layer && s.d_model == sh.d_model && s.n_head == sh.n_head;
    });
    if (sc == study.scales.end()) {
      study.scales.push_back({sh.label, sh.n_layer, sh.d_model, sh.n_head, sh.parameters, {}, {}, {}});
      sc = study.scales.end() - 1;
    }
    if (std::find(sc->sweeps.begin(), sc->sweeps.end(), run.sweep) == sc->sweeps.end()) sc->sweeps.push_back(run.sweep);
    if (std::isfinite(run.unigram) &&
        std::none_of(sc->unigrams.begin(), sc->unigrams.end(), [&](double u) { return std::abs(u - run.unigram) < 1e-9; }))
      sc->unigrams.push_back(run.unigram);
    auto cf = std::find_if(sc->configs.begin(), sc->configs.end(),
                           [&](const StudyConfig& c) { return c.heads == run.heads && c.params == run.params; });
    if (cf == sc->configs.end()) {
      StudyConfig c;
      c.heads = run.heads;
      c.uniform = run.uniform;
      c.schedule = run.uniform ? "uniform" : HeadSchedule(run.heads).compact();
      c.params = run.params;
      sc->configs.push_back(c);
      cf = sc->configs.end() - 1;
    }
    cf->runs.push_back(&run);
  }
  for (auto& sc : study.scales) {
    for (auto& c : sc.configs)
      std::sort(c.runs.begin(), c.runs.end(), [](const StudyRun* a, const StudyRun* b) { return a->seed < b->seed; });
    std::stable_sort(sc.configs.begin(), sc.configs.end(), [](const StudyConfig& a, const StudyConfig& b) {
      if (a.uniform != b.uniform) return a.uniform;
      return a.params != b.params ? a.params < b.params : a.schedule < b.schedule;
    });
  }
  return study;
}

}  // namespace prism
