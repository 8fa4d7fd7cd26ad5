#include "prism/analysis/study_runs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "prism/config/config.h"
#include "prism/config/cost.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/store/run_reader.h"
#include "prism/store/run_unigram.h"
#include "prism/store/safetensors.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/sweep_dir.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Keys that say how a run was carried out, not what was trained or measured.
bool is_run_only_key(const std::string& key) {
  return key == "train.seed" || key.rfind("schedule.", 0) == 0 || key == "train.threads" || key == "train.log_every" ||
         key == "train.checkpoint_every" || key == "train.checkpoint_minutes";
}

// A number as people write it: the YAML emitter's 0.0030000000000000001 is 0.003
// (the shortest text that reads back as the same double); other text is kept.
std::string plain_number(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v)) return fmt::format("{}", v);
  } catch (const std::exception&) {
  }
  return text;
}

void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) flatten(kv.second, prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>(), out);
    return;
  }
  if (node.IsScalar()) {
    out[prefix] = plain_number(node.as<std::string>());
    return;
  }
  YAML::Emitter e;
  e << YAML::Flow << node;
  out[prefix] = e.c_str();
}

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
    if (e.values.has("items/line") && e.values.has("items/label") && e.values.has("items/pred_norm")) {
      s.item_line = e.values.integers("items/line", r.path());
      const auto label = e.values.integers("items/label", r.path());
      const auto pred = e.values.integers("items/pred_norm", r.path());
      if (label.size() == s.item_line.size() && pred.size() == label.size())
        for (size_t i = 0; i < label.size(); ++i) s.right_norm.push_back(pred[i] == label[i]);
      else
        s.item_line.clear();
    }
    out.push_back(s);
  }
  return out;
}

// The model a run trained, from its stored config (the trainer resolves
// `vocab_size: auto` before storing it; an older run's `auto` is resolved from
// data.dir's prepare.json): its vocabulary and parameter count, the count from
// its newest checkpoint's tensors when there is one. 0 for what neither tells:
// never the preset's GPT-2 vocabulary by default.
struct ModelFacts {
  int64_t vocab = 0, parameters = 0;
  std::string parameters_from;
};

ModelFacts model_facts(const RunReader& r, const std::string& run_dir) {
  ModelFacts f;
  try {
    Config c = parse_config(YAML::Load(r.attributes().config), r.path());
    bool known = !c.model.vocab_from_data;
    if (!known) {
      const DataDescription d = describe_data(c.data.dir);
      known = d.prepared;  // unprepared or moved data: the vocabulary is unknown here
      c.model.vocab_size = d.vocab_size;
    }
    if (known) {
      f.vocab = c.model.vocab_size;
      f.parameters = model_cost(c.model, c.schedule).params;
      f.parameters_from = "config";
    }
  } catch (const std::exception&) {
    // An unreadable config: the checkpoint below may still know the count.
  }
  if (const auto ckpt = latest_checkpoint(run_dir)) {
    try {
      int64_t n = 0;
      for (const auto& t : safetensors_shapes((fs::path(*ckpt) / "model.safetensors").string())) {
        int64_t k = 1;
        for (int64_t d : t.second) k *= d;
        n += k;
      }
      f.parameters = n;
      f.parameters_from = "checkpoint";
    } catch (const Error&) {
      // A damaged checkpoint: the config's count stands.
    }
  }
  return f;
}

// The trial's experiment keys with train.dtype as the run trained (its run.h5 records it): two
// runs whose `auto` resolved differently, on two machines, are two experiments.
std::map<std::string, std::string> run_experiment(const Trial& t, const RunReader& r) {
  auto experiment = experiment_keys(t.config);
  if (const std::string ran = run_dtype(r.attributes()); !ran.empty()) experiment["train.dtype"] = ran;
  return experiment;
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
  s.experiment = run_experiment(t, r);
  s.max_steps = t.max_steps;
  s.val = r.val();
  const auto train = r.train();
  if (!train.empty()) {
    s.steps = train.back().step;
    s.tokens = train.back().tokens;
  }
  s.unigram = run_unigram_val_loss(r.attributes());
  const ModelFacts facts = model_facts(r, run_dir);
  s.parameters = facts.parameters;
  s.parameters_from = facts.parameters_from;
  s.vocab_size = facts.vocab;
  s.evals = read_evals(r);
  if (r.has_group("attention/heldout")) s.profile = read_profile(r, false);
  if (s.profile) s.profile->source = t.name;
  for (const auto& name : r.groups_under("val/by_position")) {
    PositionLoss p = position_loss_from_group(r.read_group("val/by_position/" + name), r.path() + ":/val/by_position/" + name);
    if (p.trained_context > 0 && p.context == p.trained_context) s.by_position = std::move(p);
  }
  return s;
}

RunShape shape_of(const Trial& t) {
  const Config c = parse_config(YAML::Load(t.config), "trial " + t.name);
  RunShape s;
  s.label = c.model.preset.empty() ? fmt::format("{} x {}", c.model.n_layer, c.model.d_model) : c.model.preset;
  s.n_layer = c.model.n_layer;
  s.d_model = c.model.d_model;
  s.n_head = c.model.n_head;
  return s;
}

bool same_shape(const RunShape& a, const StudyScale& s) {
  return a.label == s.label && a.n_layer == s.n_layer && a.d_model == s.d_model && a.n_head == s.n_head;
}

// Why a scale's runs of different dtypes are not pooled, with their counts.
std::string dtype_split_note(const std::string& scale, const std::vector<const StudyRun*>& runs) {
  std::map<std::string, int> n;
  for (const StudyRun* r : runs) {
    const auto it = r->experiment.find("train.dtype");
    n[it == r->experiment.end() ? std::string("(unset)") : it->second] += 1;
  }
  std::vector<std::string> counts;
  for (const auto& [dtype, k] : n) counts.push_back(fmt::format("{} {}", k, dtype));
  return fmt::format(
      "{}: the runs trained in different dtypes ({}, as each run.h5 records: `auto` resolves by measuring the "
      "machine that ran it); they are not pooled: each dtype is its own configuration (train.dtype in the settings), "
      "and a schedule is compared only with the uniform runs of its dtype. A rerun in another dtype is another study",
      scale, fmt::join(counts, ", "));
}

// A run's value of an experiment key; a key its config leaves out has the config's default
// (a learned-position arm beside a rotary one is "model.position=learned", not unset).
std::string key_value(const StudyRun& r, const std::string& key) {
  if (const auto it = r.experiment.find(key); it != r.experiment.end()) return it->second;
  static const std::map<std::string, std::string> defaults = [] {
    auto m = experiment_keys(to_yaml(Config{}));
    // to_yaml writes these only away from their default (older configs read as they did).
    m.emplace("model.position", positions_name(Positions::Learned));
    return m;
  }();
  const auto d = defaults.find(key);
  return d == defaults.end() ? std::string("(unset)") : d->second;
}

// The keys whose values differ among `runs` (a key missing from a run has its default).
std::vector<std::string> varying_keys(const std::vector<const StudyRun*>& runs) {
  std::set<std::string> keys;
  for (const auto* r : runs)
    for (const auto& kv : r->experiment) keys.insert(kv.first);
  std::vector<std::string> out;
  for (const auto& k : keys) {
    std::set<std::string> values;
    for (const auto* r : runs) values.insert(key_value(*r, k));
    if (values.size() > 1) out.push_back(k);
  }
  return out;
}

std::string settings_of(const StudyRun& r, const std::vector<std::string>& keys) {
  std::vector<std::string> parts;
  for (const auto& k : keys) parts.push_back(k + "=" + key_value(r, k));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::map<std::string, std::string> experiment_keys(const std::string& resolved_yaml) {
  std::map<std::string, std::string> all;
  flatten(YAML::Load(resolved_yaml), "", all);
  std::map<std::string, std::string> out;
  for (const auto& kv : all)
    if (!is_run_only_key(kv.first)) out.insert(kv);
  return out;
}

double StudyRun::final_val() const { return val.empty() ? kNaN : val.back().loss; }
double StudyRun::final_val_se() const { return val.empty() ? kNaN : val.back().loss_se; }

std::string StudyConfig::label() const { return settings.empty() ? schedule : schedule + " (" + settings + ")"; }

int64_t StudyConfig::max_steps() const { return runs.empty() ? 0 : runs.front()->max_steps; }

double StudyConfig::unigram() const {
  double u = kNaN;
  for (const auto* r : runs) {
    if (!std::isfinite(r->unigram)) return kNaN;
    if (std::isfinite(u) && std::abs(u - r->unigram) > 1e-9) return kNaN;
    u = r->unigram;
  }
  return u;
}

int64_t StudyConfig::parameters() const {
  int64_t n = 0;
  for (const auto* r : runs) {
    if (r->parameters <= 0 || (n != 0 && n != r->parameters)) return 0;
    n = r->parameters;
  }
  return n;
}

const StudyConfig* StudyScale::baseline_of(const StudyConfig& c) const {
  for (const auto& b : configs)
    if (b.uniform && b.settings == c.settings) return &b;
  return nullptr;
}

void group_study(Study& study, const std::vector<RunShape>& shapes) {
  if (shapes.size() != study.runs.size())
    throw Error(fmt::format("{} shapes for {} runs", shapes.size(), study.runs.size()), "group_study",
                "give one shape per run");
  study.scales.clear();
  std::vector<std::vector<size_t>> members;  // per scale: its runs
  for (size_t i = 0; i < study.runs.size(); ++i) {
    const RunShape& sh = shapes[i];
    auto sc = std::find_if(study.scales.begin(), study.scales.end(), [&](const StudyScale& s) { return same_shape(sh, s); });
    if (sc == study.scales.end()) {
      StudyScale s;
      s.label = sh.label;
      s.n_layer = sh.n_layer;
      s.d_model = sh.d_model;
      s.n_head = sh.n_head;
      study.scales.push_back(s);
      members.emplace_back();
      sc = study.scales.end() - 1;
    }
    members[static_cast<size_t>(sc - study.scales.begin())].push_back(i);
  }
  for (size_t s = 0; s < study.scales.size(); ++s) {
    StudyScale& sc = study.scales[s];
    std::vector<const StudyRun*> runs;
    for (size_t i : members[s]) runs.push_back(&study.runs[i]);
    sc.varying = varying_keys(runs);
    if (std::find(sc.varying.begin(), sc.varying.end(), "train.dtype") != sc.varying.end())
      study.notes.push_back(dtype_split_note(sc.label, runs));
    for (size_t i : members[s]) {
      StudyRun& run = study.runs[i];
      run.settings = settings_of(run, sc.varying);
      if (std::find(sc.sweeps.begin(), sc.sweeps.end(), run.sweep) == sc.sweeps.end()) sc.sweeps.push_back(run.sweep);
      if (std::isfinite(run.unigram) && std::none_of(sc.unigrams.begin(), sc.unigrams.end(),
                                                     [&](double u) { return std::abs(u - run.unigram) < 1e-9; }))
        sc.unigrams.push_back(run.unigram);
      auto cf = std::find_if(sc.configs.begin(), sc.configs.end(),
                             [&](const StudyConfig& c) { return c.heads == run.heads && c.settings == run.settings; });
      if (cf == sc.configs.end()) {
        StudyConfig c;
        c.heads = run.heads;
        c.uniform = run.uniform;
        c.schedule = run.uniform ? "uniform" : HeadSchedule(run.heads).compact();
        c.settings = run.settings;
        sc.configs.push_back(c);
        cf = sc.configs.end() - 1;
      }
      cf->runs.push_back(&run);
    }
    for (auto& c : sc.configs)
      std::sort(c.runs.begin(), c.runs.end(), [](const StudyRun* a, const StudyRun* b) { return a->seed < b->seed; });
    std::stable_sort(sc.configs.begin(), sc.configs.end(), [](const StudyConfig& a, const StudyConfig& b) {
      if (a.uniform != b.uniform) return a.uniform;
      return a.settings != b.settings ? a.settings < b.settings : a.schedule < b.schedule;
    });
  }
}

Study load_study(const std::vector<std::string>& sweep_dirs) {
  if (sweep_dirs.empty())
    throw Error("no sweep directories given", "prism report", "pass the study's sweep directories");
  Study study;
  study.sweeps = sweep_dirs;
  std::vector<RunShape> shapes;  // per run
  std::map<std::string, size_t> seen;  // the run's identity -> its index in study.runs
  for (const auto& dir : sweep_dirs) {
    const fs::path yaml = fs::path(dir) / "sweep.yaml";
    if (!fs::exists(yaml))
      throw Error("not a sweep directory (no sweep.yaml)", dir, "pass directories that prism sweep made");
    const SweepPlan plan = plan_from_yaml(yaml.string());
    std::vector<std::string> unfinished;
    struct Duplicates {
      int count = 0;
      std::vector<std::string> differing;
    };
    std::map<std::string, Duplicates> duplicates;  // by the sweep that keeps the runs
    for (const auto& t : plan.trials) {
      if (!final_run_completed(plan, dir, t)) {
        unfinished.push_back(t.name);
        continue;
      }
      const RunShape shape = shape_of(t);
      const std::string run_dir = final_run_dir(plan, dir, t);
      std::string id = fmt::format("{}|{}|{}|", shape.label, fmt::join(t.schedule.heads(), ","), t.seed);
      for (const auto& kv : run_experiment(t, RunReader(run_dir))) id += kv.first + "=" + kv.second + ";";
      if (seen.count(id)) {
        const StudyRun& kept = study.runs[seen[id]];
        const auto val = RunReader(run_dir).val();
        const double other = val.empty() ? kNaN : val.back().loss;
        auto& d = duplicates[kept.sweep];
        ++d.count;
        if (kept.final_val() != other)  // the same configuration and seed, another result: say which
          d.differing.push_back(fmt::format("{} (final validation loss {:.6f} there, {:.6f} here)", t.name,
                                            kept.final_val(), other));
        continue;
      }
      seen[id] = study.runs.size();
      study.runs.push_back(read_run(t, dir, run_dir));
      shapes.push_back(shape);
    }
    for (const auto& [kept_in, d] : duplicates)
      study.notes.push_back(fmt::format(
          "{}: {} trial(s) are the same configuration and seed as runs of {}, which are kept; {}", dir, d.count,
          kept_in,
          d.differing.empty()
              ? std::string("their final validation losses are identical")
              : fmt::format("{} of them ended differently (trained by another build?): {}", d.differing.size(),
                            fmt::join(d.differing, "; "))));
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
  group_study(study, shapes);
  return study;
}

}  // namespace prism
