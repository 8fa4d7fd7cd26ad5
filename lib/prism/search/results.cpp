#include "prism/search/results.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "prism/atomic_file.h"
#include "prism/store/run_store.h"
#include "prism/store/table.h"
#include "prism/sweep/halving.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

std::string guidelines_text(const RankedSchedule& r) {
  std::vector<std::string> parts;
  for (const auto& f : r.guidelines) parts.push_back(f.describe());
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string pick(const Ranking& r, int index) {
  return index < 0 ? std::string() : r.ranked[static_cast<size_t>(index)].schedule.compact();
}

std::string number(double v, const char* format = "{:.4f}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(format), v) : std::string("-");
}

}  // namespace

ResultGroup ranking_group(const SearchPlan& plan, const Ranking& r) {
  ResultGroup g;
  const auto n = static_cast<uint64_t>(r.ranked.size());
  const auto L = static_cast<uint64_t>(plan.space.layers());
  std::vector<int32_t> heads;
  std::vector<double> loss, se, est;
  std::vector<int64_t> rules;
  std::vector<std::string> guidelines, why;
  for (const auto& e : r.ranked) {
    heads.insert(heads.end(), e.schedule.heads().begin(), e.schedule.heads().end());
    loss.push_back(e.loss);
    se.push_back(e.loss_se);
    est.push_back(e.estimate);
    rules.push_back(e.hard_rules ? 1 : 0);
    guidelines.push_back(guidelines_text(e));
    why.push_back(e.why);
  }
  g.set_int32("heads", {n, L}, heads);
  g.set_real("loss", {n}, loss);
  g.set_real("loss_se", {n}, se);
  g.set_real("estimate", {n}, est);
  g.set_integer("hard_rules", {n}, rules);
  g.set_strings("guidelines", {n}, guidelines);
  g.set_strings("why", {n}, why);
  if (r.scores) {
    const auto K = static_cast<uint64_t>(r.scores->choices.size());
    g.set_real("scores", {L, K}, r.scores->score);
    std::vector<int32_t> choices(r.scores->choices.begin(), r.scores->choices.end());
    g.set_int32("choices", {K}, choices);
  }
  g.text["decoded"] = pick(r, r.decoded);
  g.text["unconstrained"] = pick(r, r.unconstrained);
  g.text["all_rules"] = pick(r, r.all_rules);
  g.text["method"] = method_name(plan.settings.method);
  g.text["space"] = plan.space.describe();
  g.numbers["space_size"] = r.space_size;
  g.numbers["batches"] = static_cast<double>(r.batches);
  g.numbers["probes"] = static_cast<double>(r.probes);
  g.numbers["probe_batches"] = static_cast<double>(r.probe_batches);
  g.numbers["estimate_tau"] = r.estimate_tau;
  return g;
}

std::string ranking_csv(const Ranking& r) {
  Table t;
  t.columns = {"rank", "schedule", "heads", "loss", "loss_se", "estimate", "hard_rules", "guidelines", "why"};
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& e = r.ranked[i];
    t.add({static_cast<int64_t>(i + 1), e.schedule.compact(), fmt::format("{}", fmt::join(e.schedule.heads(), " ")), e.loss,
           e.loss_se, e.estimate, static_cast<int64_t>(e.hard_rules), guidelines_text(e), e.why});
  }
  return to_csv(t);
}

namespace {

// A sweep grid's schedule.heads axis: one flow sequence of counts per schedule.
YAML::Node schedule_axis(const std::vector<HeadSchedule>& schedules) {
  YAML::Node axis(YAML::NodeType::Sequence);
  for (const auto& s : schedules) {
    YAML::Node heads(YAML::NodeType::Sequence);
    for (int h : s.heads()) heads.push_back(h);
    heads.SetStyle(YAML::EmitterStyle::Flow);
    axis.push_back(heads);
  }
  return axis;
}

// `root` (a run's config) with a `sweep:` section of that name, baseline and grid (and
// `halving`, when given), as YAML.
std::string sweep_file_yaml(YAML::Node root, const std::string& name, bool baseline, const YAML::Node& grid,
                            const YAML::Node& halving = YAML::Node()) {
  YAML::Node sweep;
  sweep["name"] = name;
  sweep["baseline"] = baseline;
  sweep["grid"] = grid;
  if (halving) sweep["halving"] = halving;
  root["sweep"] = sweep;
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

}  // namespace

std::string top_sweep_yaml(const SearchPlan& plan, const Ranking& r) {
  std::vector<HeadSchedule> top;
  for (const auto& e : r.ranked)
    if (e.hard_rules && std::isfinite(e.loss) && static_cast<int>(top.size()) < plan.settings.top) top.push_back(e.schedule);
  if (top.empty()) return "";
  YAML::Node grid;
  grid["schedule.heads"] = schedule_axis(top);
  for (uint64_t seed : plan.settings.seeds) grid["train.seed"].push_back(seed);
  grid["train.seed"].SetStyle(YAML::EmitterStyle::Flow);
  const std::string file = sweep_file_yaml(YAML::Load(to_yaml(plan.config)), plan.settings.name + "-top", true, grid);
  return fmt::format(
      "# The best {} schedule{} (rules 1-3) of search {} ({}), ranked by their held-out loss under the\n"
      "# shared weights, to train from scratch with seeds {}, and the uniform baseline. Written by prism search:\n"
      "#   prism sweep {{this file}} --dry-run\n{}\n",
      top.size(), top.size() == 1 ? "" : "s", plan.settings.name, plan.space.describe(), fmt::join(plan.settings.seeds, ", "),
      file);
}

int64_t finetune_count(const FinetuneSettings& f, int64_t ranked) {
  if (f.steps <= 0) return 0;
  return f.schedules > 0 ? std::min(f.schedules, ranked) : ranked;
}

std::vector<FinetuneRung> finetune_rungs(const FinetuneSettings& f, int64_t ranked) {
  int64_t n = finetune_count(f, ranked);
  if (n <= 0) return {};
  if (!f.halving.enabled) return {{n, f.steps}};
  std::vector<FinetuneRung> out;
  for (int64_t budget : rung_budgets(f.steps, f.halving)) {
    out.push_back({n, budget});
    n = std::max<int64_t>(1, (n + f.halving.eta - 1) / f.halving.eta);  // promote()'s count: no baseline here
  }
  return out;
}

std::string finetune_text(const std::vector<FinetuneRung>& rungs) {
  std::string s;
  for (const auto& r : rungs)
    s += s.empty() ? fmt::format("{} schedule{} x {} steps", r.schedules, r.schedules == 1 ? "" : "s", r.steps)
                   : fmt::format(", then the best {} x {}", r.schedules, r.steps);
  return s;
}

namespace {

// The schedules finetune.yaml trains: the best finetune.schedules of those ranked with a loss.
std::vector<HeadSchedule> finetune_schedules(const FinetuneSettings& f, const Ranking& r) {
  std::vector<HeadSchedule> out;
  for (const auto& e : r.ranked)
    if (std::isfinite(e.loss)) out.push_back(e.schedule);
  out.resize(static_cast<size_t>(finetune_count(f, static_cast<int64_t>(out.size()))));
  return out;
}

}  // namespace

std::string finetune_sweep_yaml(const SearchPlan& plan, const Ranking& r, const std::string& run_dir) {
  const FinetuneSettings& f = plan.settings.finetune;
  const std::vector<HeadSchedule> schedules = finetune_schedules(f, r);
  if (schedules.empty()) return "";
  YAML::Node root = YAML::Load(to_yaml(plan.config));
  const std::string from = fs::absolute(run_dir).lexically_normal().string();
  const int64_t warmup = f.warmup_steps >= 0 ? f.warmup_steps : f.steps / 10;
  // The ranking holds rule-breaking schedules too: each is trained as ranked.
  root["schedule"]["hard_rules"] = false;
  YAML::Node train = root["train"];
  train["init_from"] = from;
  train["max_steps"] = f.steps;
  train["warmup_steps"] = warmup;
  if (f.lr > 0) train["lr"] = f.lr;
  train["eval_every"] = 0;
  train["checkpoint_every"] = 0;
  train["distance_every"] = 0;
  YAML::Node grid;
  grid["schedule.heads"] = schedule_axis(schedules);
  YAML::Node halving;
  std::string how = fmt::format("trained {} steps", f.steps);
  if (f.halving.enabled) {
    // One seed: the plain best 1/eta go on at each rung (the noise rule needs seeds).
    halving["enabled"] = true;
    halving["eta"] = f.halving.eta;
    halving["min_steps"] = f.halving.min_steps;
    halving["keep_baseline"] = false;
    halving.SetStyle(YAML::EmitterStyle::Flow);
    how = fmt::format("trained under successive halving ({}; warm-up scaled with each rung)",
                      finetune_text(finetune_rungs(f, static_cast<int64_t>(schedules.size()))));
  }
  const std::string file = sweep_file_yaml(root, plan.settings.name + "-finetune", false, grid, halving);
  return fmt::format(
      "# The {} best schedule{} of search {} ({}) by their held-out loss under the shared weights, each\n"
      "# {} from those weights ({}; warm-up {}, seed {}: the same data for every\n"
      "# schedule) and ranked again by the sweep's held-out loss: weight sharing favours the head counts\n"
      "# the shared model trained most, and a short fine-tune undoes much of it (docs/search.md). Written\n"
      "# by prism search:\n"
      "#   prism sweep {{this file}} --out {}/finetune\n{}\n",
      schedules.size(), schedules.size() == 1 ? "" : "s", plan.settings.name, plan.space.describe(), how, from, warmup,
      plan.config.train.seed, from, file);
}

void write_search_results(const SearchPlan& plan, const Ranking& r, const std::string& run_dir, RunStore* store) {
  if (store) store->write_group("search/ranking", ranking_group(plan, r));
  write_file_atomic((fs::path(run_dir) / "ranking.csv").string(), ranking_csv(r));
  const std::string top = top_sweep_yaml(plan, r);
  if (!top.empty()) write_file_atomic((fs::path(run_dir) / "top.yaml").string(), top);
  const std::string finetune = finetune_sweep_yaml(plan, r, run_dir);
  if (!finetune.empty()) write_file_atomic((fs::path(run_dir) / "finetune.yaml").string(), finetune);
}

std::string format_ranking(const SearchPlan& plan, const Ranking& r, const std::string& run_dir) {
  std::string s = fmt::format("ranking of {} ({}): {} schedules evaluated exactly under the shared weights, on {} held-out "
                              "batches each",
                              plan.space.describe(), method_name(plan.settings.method), r.ranked.size(), r.batches);
  if (r.probes > 0)
    s += fmt::format("; per-layer scores fitted to {} random schedules on {} batches", r.probes, r.probe_batches);
  else if (r.scores)
    s += "; per-layer scores from the architecture weights (-log p)";
  if (std::isfinite(r.estimate_tau)) s += fmt::format("; Kendall tau of estimate vs exact {:.2f}", r.estimate_tau);
  s += "\n";
  s += fmt::format("  {:>4}  {:<22}  {:>8}  {:>7}  {:>9}  {:<9}  {}\n", "rank", "schedule", "loss", "± se", "estimate",
                   "rules 1-3", "guidelines 4-6");
  const size_t show = std::min<size_t>(r.ranked.size(), 20);
  for (size_t i = 0; i < show; ++i) {
    const auto& e = r.ranked[i];
    s += fmt::format("  {:>4}  {:<22}  {:>8}  {:>7}  {:>9}  {:<9}  {}\n", i + 1, e.schedule.compact(), number(e.loss),
                     number(e.loss_se), number(e.estimate), e.hard_rules ? "yes" : "no",
                     e.guidelines.empty() ? "follows all" : fmt::format("{} finding(s)", e.guidelines.size()));
  }
  if (show < r.ranked.size()) s += fmt::format("  ... {} more in ranking.csv\n", r.ranked.size() - show);
  auto describe_pick = [&](const char* what, int index) {
    if (index < 0) return fmt::format("{}: none evaluated\n", what);
    const auto& e = r.ranked[static_cast<size_t>(index)];
    std::string line = fmt::format("{}: {} {} (loss {})", what, e.schedule.compact(), e.schedule.list(), number(e.loss));
    if (e.guidelines.empty()) return line + ", follows guidelines 4-6\n";
    for (const auto& f : e.guidelines) line += "\n    guideline " + f.describe();
    return line + "\n";
  };
  s += describe_pick("decoded (rules 1-3)", r.decoded);
  s += describe_pick("unconstrained", r.unconstrained);
  if (r.all_rules != r.decoded) s += describe_pick("best following all six rules", r.all_rules);
  s += fmt::format("ranking: {}/ranking.csv and {}/run.h5 /search/ranking\n", run_dir, run_dir);
  if (!top_sweep_yaml(plan, r).empty())
    s += fmt::format("train the top schedules from scratch: prism sweep {}/top.yaml\n", run_dir);
  const auto rungs = finetune_rungs(plan.settings.finetune,
                                    static_cast<int64_t>(finetune_schedules(plan.settings.finetune, r).size()));
  if (!rungs.empty())
    s += fmt::format("rank them again, fine-tuned from the shared weights ({}): prism sweep {}/finetune.yaml "
                     "--out {}/finetune\n",
                     finetune_text(rungs), run_dir, run_dir);
  return s;
}

}  // namespace prism
