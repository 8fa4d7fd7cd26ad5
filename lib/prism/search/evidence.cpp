#include "prism/search/evidence.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "prism/analysis/stats.h"
#include "prism/atomic_file.h"
#include "prism/config/config.h"
#include "prism/error.h"
#include "prism/schedule/cost.h"
#include "prism/schedule/rules.h"
#include "prism/search/search.h"
#include "prism/sweep/plan.h"

#include <yaml-cpp/yaml.h>

namespace fs = std::filesystem;

namespace prism {

namespace {

// The vocabulary a run trained with, from the config.yaml it wrote ("" if there is none).
// Sweep and search files may say `vocab_size: auto`, which resolves against data.dir
// from the working directory: the preset's 50257 ids where the data is not prepared
// there (as for a report's copied inputs), while the runs trained on the data's.
std::string run_vocabulary(const fs::path& run_dir) {
  const fs::path config = run_dir / "config.yaml";
  if (!fs::exists(config)) return "";
  try {
    const YAML::Node v = YAML::LoadFile(config.string())["model"]["vocab_size"];
    return v && v.IsScalar() && v.Scalar() != "auto" ? v.Scalar() : "";
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("cannot read the run's config: {}", e.what()), config.string(),
                "restore the config.yaml that prism wrote, or remove it to cost the run from its sweep or search file");
  }
}

// A search as its run was costed: its vocabulary from the run's config.yaml.
SearchPlan search_plan_of(const std::string& dir) {
  const std::string v = run_vocabulary(dir);
  return plan_search((fs::path(dir) / "search.yaml").string(),
                     v.empty() ? std::vector<std::string>{} : std::vector<std::string>{"model.vocab_size=" + v});
}

// Says so when a cost rests on the preset's vocabulary because the data is not there.
void note_vocabulary(const std::string& what, const Config& c, std::vector<std::string>& notes) {
  if (c.vocab_source.rfind("the preset's", 0) == 0)
    notes.push_back(fmt::format("{}: costed with {} token ids, {}; run the report where its data is prepared "
                                "(data.dir is read from the working directory)",
                                what, c.model.vocab_size, c.vocab_source));
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Heads = std::vector<int>;

std::string label(const Heads& h) { return HeadSchedule(h).compact(); }

// "[1, 1, 4]" or "1 1 4" -> {1, 1, 4}
Heads parse_heads_text(const std::string& text) {
  Heads out;
  std::string num;
  for (char c : text + " ") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      num += c;
    } else if (!num.empty()) {
      out.push_back(std::stoi(num));
      num.clear();
    }
  }
  return out;
}

size_t column(const CsvFile& f, const std::string& name, const std::string& path) {
  for (size_t i = 0; i < f.header.size(); ++i)
    if (f.header[i] == name) return i;
  throw Error(fmt::format("no column '{}'", name), path, "pass a file written by this version of prism");
}

// Final validation losses by schedule and seed, from sweep directories' summary.csv (completed runs
// at their trial's full budget; the first of duplicates kept).
struct Runs {
  std::map<Heads, std::map<uint64_t, double>> loss;
  double tokens_all_rungs = 0;  // the compute every trial of the sweeps consumed
};

Runs read_sweep(const std::string& dir) {
  const std::string path = (fs::path(dir) / "summary.csv").string();
  if (!fs::exists(path))
    throw Error("no summary.csv", dir, "pass a sweep directory (prism sweep writes summary.csv; prism sweep DIR --collect rebuilds it)");
  const CsvFile f = read_csv(path);
  const size_t c_heads = column(f, "heads", path), c_seed = column(f, "seed", path), c_status = column(f, "status", path),
               c_loss = column(f, "final_val_loss", path), c_tokens = column(f, "tokens_all_rungs", path);
  Runs r;
  for (const auto& row : f.rows) {
    if (!row[c_tokens].empty()) r.tokens_all_rungs += std::stod(row[c_tokens]);
    if (row[c_status] != "completed" || row[c_loss].empty()) continue;
    auto& by_seed = r.loss[parse_heads_text(row[c_heads])];
    by_seed.emplace(std::stoull(row[c_seed]), std::stod(row[c_loss]));
  }
  return r;
}

struct Paired {
  double diff = kNaN;
  Interval ci{kNaN, kNaN};
  size_t seeds = 0;
};

// mean over common seeds of a - b, with its Student-t interval.
Paired paired(const std::map<uint64_t, double>& a, const std::map<uint64_t, double>& b, double confidence) {
  std::vector<double> d;
  for (const auto& [seed, v] : a) {
    auto it = b.find(seed);
    if (it != b.end()) d.push_back(v - it->second);
  }
  Paired p;
  p.seeds = d.size();
  if (d.empty()) return p;
  p.diff = mean_of(d);
  p.ci = mean_interval(d, confidence);
  return p;
}

bool contains_zero(const Interval& i) { return i.lo <= 0 && i.hi >= 0; }

struct GroundTruth {
  std::vector<Heads> schedules;            // by mean, best first
  std::map<Heads, double> mean;
  std::map<Heads, Paired> vs_best;
  std::set<Heads> band;
  // The schedules rules 1-3 allow at the ground truth's model (h_base = its model.n_head), and the
  // best of them: what a decoded pick can reach when the best schedule breaks a rule.
  std::set<Heads> allowed;
  Heads best_allowed;                      // empty when rules 1-3 allow none
  std::vector<uint64_t> seeds;             // every schedule's
  // How well one seed's ranking agrees with the others': per seed, Kendall tau between its
  // losses and the mean of the other seeds' over the schedules. The ceiling a search's tau
  // against the ground truth's means can be read against.
  std::vector<double> seed_tau;
  double run_flops = 0;                    // one run of it
  double flops_per_token = 0;
};

double mean_loss(const std::map<uint64_t, double>& by_seed) {
  double s = 0;
  for (const auto& kv : by_seed) s += kv.second;
  return s / static_cast<double>(by_seed.size());
}

GroundTruth read_ground_truth(const std::string& dir, double confidence, std::vector<std::string>& notes) {
  const Runs runs = read_sweep(dir);
  GroundTruth g;
  // The seeds every schedule has: the paired design.
  std::set<uint64_t> common;
  bool first = true;
  for (const auto& [h, by_seed] : runs.loss) {
    std::set<uint64_t> s;
    for (const auto& kv : by_seed) s.insert(kv.first);
    if (first) common = s;
    else {
      std::set<uint64_t> both;
      std::set_intersection(common.begin(), common.end(), s.begin(), s.end(), std::inserter(both, both.begin()));
      common = both;
    }
    first = false;
  }
  if (runs.loss.size() < 2 || common.size() < 2)
    throw Error(fmt::format("{} schedules with {} seeds common to all of them", runs.loss.size(), common.size()), dir,
                "train at least 2 schedules with the same 2 or more seeds to completion");
  g.seeds.assign(common.begin(), common.end());
  std::map<Heads, std::map<uint64_t, double>> kept;
  for (const auto& [h, by_seed] : runs.loss) {
    for (uint64_t s : common) kept[h][s] = by_seed.at(s);
    if (by_seed.size() > common.size())
      notes.push_back(fmt::format("{}: {} seeds beyond the {} every schedule has are left out", label(h),
                                  by_seed.size() - common.size(), common.size()));
    g.schedules.push_back(h);
    g.mean[h] = mean_loss(kept[h]);
  }
  std::sort(g.schedules.begin(), g.schedules.end(), [&](const Heads& a, const Heads& b) { return g.mean[a] < g.mean[b]; });
  const Heads& best = g.schedules.front();
  for (const auto& h : g.schedules) {
    g.vs_best[h] = paired(kept[h], kept[best], confidence);
    if (h == best || contains_zero(g.vs_best[h].ci)) g.band.insert(h);
  }
  for (uint64_t s : g.seeds) {
    std::vector<double> one, rest;
    for (const auto& h : g.schedules) {
      double sum = 0;
      for (uint64_t o : g.seeds)
        if (o != s) sum += kept[h][o];
      one.push_back(kept[h][s]);
      rest.push_back(sum / static_cast<double>(g.seeds.size() - 1));
    }
    g.seed_tau.push_back(kendall_tau(one, rest));
  }
  // The cost of one of its runs, from its resolved trials (every schedule costs the same: neutrality).
  const SweepPlan plan = plan_from_yaml((fs::path(dir) / "sweep.yaml").string());
  const Trial& t = plan.trials.front();
  Config c = trial_config(t);  // its vocabulary from the data, as the trained runs' was
  const std::string v = run_vocabulary(fs::path(dir) / t.name);
  if (!v.empty()) {
    c.model.vocab_size = std::stoi(v);
  } else {
    note_vocabulary(dir, c, notes);
  }
  const int64_t T = c.train.seq_len > 0 ? c.train.seq_len : c.model.block_size;
  g.flops_per_token = model_cost(c.model, t.schedule, static_cast<int>(T)).train_flops_per_token;
  g.run_flops = static_cast<double>(t.max_steps * t.step_tokens) * g.flops_per_token;
  for (const auto& h : g.schedules)  // best first
    if (check_schedule(HeadSchedule(h), static_cast<int>(h.size()), c.model.d_model, c.model.n_head).ok()) {
      g.allowed.insert(h);
      if (g.best_allowed.empty()) g.best_allowed = h;
    }
  return g;
}

struct RankedRow {
  Heads heads;
  double loss = kNaN, estimate = kNaN;
  bool hard_rules = false;
};

std::vector<RankedRow> read_ranking(const std::string& dir) {
  const std::string path = (fs::path(dir) / "ranking.csv").string();
  if (!fs::exists(path)) throw Error("no ranking.csv", dir, "pass the directory of a prism search that completed");
  const CsvFile f = read_csv(path);
  const size_t c_heads = column(f, "heads", path), c_loss = column(f, "loss", path),
               c_est = column(f, "estimate", path), c_rules = column(f, "hard_rules", path);
  std::vector<RankedRow> out;
  for (const auto& row : f.rows) {
    RankedRow r;
    r.heads = parse_heads_text(row[c_heads]);
    r.loss = row[c_loss].empty() ? kNaN : std::stod(row[c_loss]);
    r.estimate = row[c_est].empty() ? kNaN : std::stod(row[c_est]);
    r.hard_rules = row[c_rules] == "1";
    out.push_back(r);
  }
  return out;
}

// A search's second ranking: the sweep that fine-tuned its ranked schedules from the shared weights
// (`prism sweep RUN/finetune.yaml --out RUN/finetune`), best first. Under successive halving the
// schedules that reached the last rung come first, by their loss there, then each earlier rung's.
struct FinetuneRanking {
  std::vector<Heads> order;
  std::map<Heads, double> loss;      // at the last rung each reached
  double tokens = 0;                 // every run's training tokens, every rung
  int64_t evaluations = 0;           // held-out evaluations: one per run, every rung
  std::string describe;              // "36 x 150 steps" or "36 x 150 steps, then the best 12 x 450"
  std::string recipe;                // the same, short, for the method's name: "36 at 150, 12 at 450 steps"
};

std::optional<FinetuneRanking> read_finetune(const std::string& search_dir) {
  const fs::path dir = fs::path(search_dir) / "finetune";
  const std::string path = (dir / "summary.csv").string();
  if (!fs::exists(path)) return std::nullopt;
  const CsvFile f = read_csv(path);
  const size_t c_heads = column(f, "heads", path), c_status = column(f, "status", path), c_rung = column(f, "rung", path),
               c_steps = column(f, "steps", path), c_loss = column(f, "final_val_loss", path),
               c_tokens = column(f, "tokens_all_rungs", path);
  struct Row {
    Heads heads;
    int rung;
    double loss;
  };
  std::vector<Row> rows;
  std::map<int, int64_t> steps_at;  // rung -> its budget
  FinetuneRanking r;
  for (const auto& row : f.rows) {
    if (!row[c_tokens].empty()) r.tokens += std::stod(row[c_tokens]);
    const std::string& status = row[c_status];
    if ((status != "completed" && status != "pruned") || row[c_loss].empty()) continue;
    const int rung = row[c_rung].empty() ? 0 : std::stoi(row[c_rung]);
    r.evaluations += rung + 1;
    if (!row[c_steps].empty()) steps_at[rung] = std::stoll(row[c_steps]);
    rows.push_back({parse_heads_text(row[c_heads]), rung, std::stod(row[c_loss])});
  }
  if (rows.empty())
    throw Error("no fine-tuned schedule completed", path,
                "finish the fine-tuning (rerun `prism sweep RUN/finetune.yaml --out RUN/finetune`), or pass --ranking shared");
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.rung != b.rung ? a.rung > b.rung : a.loss < b.loss;
  });
  for (const auto& row : rows)
    if (r.loss.emplace(row.heads, row.loss).second) r.order.push_back(row.heads);
  for (const auto& rung_steps : steps_at) {  // not a structured binding: C++17 lambdas cannot capture one
    const int rung = rung_steps.first;
    const auto reached = std::count_if(rows.begin(), rows.end(), [&](const Row& x) { return x.rung >= rung; });
    r.describe += fmt::format("{}{}{} x {} steps", r.describe.empty() ? "" : ", then ", r.describe.empty() ? "" : "the best ",
                              reached, rung_steps.second);
    r.recipe += fmt::format("{}{} at {}", r.recipe.empty() ? "" : ", ", reached, rung_steps.second);
  }
  r.recipe += " steps";
  return r;
}

std::string num(double v, const char* f = "{:.4f}") { return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("-"); }
std::string interval(const Interval& i, const char* f = "{:+.4f}") {
  return std::isfinite(i.lo) ? fmt::format("[{}, {}]", fmt::format(fmt::runtime(f), i.lo), fmt::format(fmt::runtime(f), i.hi)) : std::string("-");
}

struct SearchResult {
  std::string dir, method, ranking = "shared weights";
  uint64_t seed = 0;
  double tau = kNaN, tau_shared = kNaN, tau_estimate = kNaN;  // tau of the ranking judged, of the shared weights' loss
  size_t ranked_gt = 0;
  Heads pick;
  Paired pick_vs_best, pick_vs_allowed;  // against the best schedule, and the best rules 1-3 allow
  bool pick_in_gt = false, pick_trained = false, in_band = false, in_allowed_band = false;
  double search_share = kNaN, total_share = kNaN, budget_runs = kNaN;
};

// Random search's pick over every subset of `b` ground-truth schedules and every seed: the share in the band, mean regret.
std::pair<double, double> random_search(const GroundTruth& g, const std::map<Heads, std::map<uint64_t, double>>& loss,
                                        size_t b) {
  const size_t n = g.schedules.size();
  b = std::min(b, n);
  if (b == 0) return {kNaN, kNaN};
  std::vector<size_t> idx(b);
  for (size_t i = 0; i < b; ++i) idx[i] = i;
  double in_band = 0, regret = 0, count = 0;
  const double best = g.mean.at(g.schedules.front());
  for (;;) {
    for (uint64_t s : g.seeds) {
      const Heads* pick = nullptr;
      double pick_loss = std::numeric_limits<double>::infinity();
      for (size_t i : idx) {
        const double v = loss.at(g.schedules[i]).at(s);
        if (v < pick_loss) {
          pick_loss = v;
          pick = &g.schedules[i];
        }
      }
      in_band += g.band.count(*pick) ? 1.0 : 0.0;
      regret += g.mean.at(*pick) - best;
      count += 1;
    }
    // Next subset (lexicographic).
    size_t i = b;
    while (i > 0 && idx[i - 1] == n - b + i - 1) --i;
    if (i == 0) break;
    ++idx[i - 1];
    for (size_t j = i; j < b; ++j) idx[j] = idx[j - 1] + 1;
  }
  return {in_band / count, regret / count};
}

}  // namespace

Evidence evaluate_search(const EvidenceOptions& o) {
  Evidence e;
  if (o.pick != "decoded" && o.pick != "unconstrained")
    throw Error("unknown pick '" + o.pick + "'", "search evidence", "use decoded or unconstrained");
  if (o.ranking != "finetuned" && o.ranking != "shared")
    throw Error("unknown ranking '" + o.ranking + "'", "search evidence",
                "use finetuned (a search's fine-tuned ranking where RUN/finetune has one) or shared");
  const GroundTruth g = read_ground_truth(o.ground_truth, o.confidence, e.notes);
  const Runs gt_runs = read_sweep(o.ground_truth);
  std::map<Heads, std::map<uint64_t, double>> gt_loss;
  for (const auto& h : g.schedules)
    for (uint64_t s : g.seeds) gt_loss[h][s] = gt_runs.loss.at(h).at(s);
  const double grid_flops = static_cast<double>(g.schedules.size() * g.seeds.size()) * g.run_flops;
  std::map<Heads, std::map<uint64_t, double>> retrained;
  for (const auto& d : o.retrained)
    for (const auto& [h, by_seed] : read_sweep(d).loss)
      for (const auto& [s, v] : by_seed) retrained[h].emplace(s, v);
  const Heads& best = g.schedules.front();

  // The ground truth.
  e.ground_truth.columns = {"rank", "schedule", "heads", "seeds", "val_loss", "diff_vs_best", "ci_lo", "ci_hi", "top_band"};
  for (size_t i = 0; i < g.schedules.size(); ++i) {
    const Heads& h = g.schedules[i];
    const Paired& p = g.vs_best.at(h);
    e.ground_truth.add({static_cast<int64_t>(i + 1), label(h), fmt::format("{}", fmt::join(h, " ")),
                        static_cast<int64_t>(g.seeds.size()), g.mean.at(h), p.diff, p.ci.lo, p.ci.hi,
                        static_cast<int64_t>(g.band.count(h))});
  }
  const Heads& worst = g.schedules.back();
  const Paired spread = g.vs_best.at(worst);
  const double half = (spread.ci.hi - spread.ci.lo) / 2;

  // The searches.
  std::vector<SearchResult> results;
  for (const auto& dir : o.searches) {
    SearchResult r;
    r.dir = dir;
    const SearchPlan plan = search_plan_of(dir);
    note_vocabulary(dir, plan.config, e.notes);
    r.method = method_name(plan.settings.method);
    r.seed = plan.settings.seed;
    const auto shared = read_ranking(dir);
    std::vector<double> ex, est, truth;
    for (const auto& row : shared) {
      if (!g.mean.count(row.heads) || !std::isfinite(row.loss)) continue;
      ex.push_back(row.loss);
      est.push_back(row.estimate);
      truth.push_back(g.mean.at(row.heads));
    }
    r.ranked_gt = ex.size();
    r.tau = r.tau_shared = kendall_tau(ex, truth);
    r.tau_estimate = kendall_tau(est, truth);
    // The ranking judged: the fine-tuned one where the search has it (the schedules it fine-tuned
    // first, in its order; any others after them, in the shared order), else the shared weights'.
    std::vector<RankedRow> rows = shared;
    const std::optional<FinetuneRanking> ft = o.ranking == "finetuned" ? read_finetune(dir) : std::nullopt;
    if (ft) {
      // Searches are judged together only when fine-tuned alike: the recipe is part of the method's name.
      r.method += " + fine-tune (" + ft->recipe + ")";
      r.ranking = "fine-tuned: " + ft->describe;
      const ModelConfig& m = plan.config.model;
      rows.clear();
      for (const auto& h : ft->order) {
        RankedRow x;
        x.heads = h;
        x.loss = ft->loss.at(h);
        x.hard_rules = check_schedule(HeadSchedule(h), m.n_layer, m.d_model, m.n_head).ok();
        rows.push_back(x);
      }
      for (const auto& row : shared)
        if (!ft->loss.count(row.heads)) rows.push_back(row);
      std::vector<double> position;
      truth.clear();
      for (size_t i = 0; i < rows.size(); ++i)
        if (g.mean.count(rows[i].heads) && std::isfinite(rows[i].loss)) {
          position.push_back(static_cast<double>(i));
          truth.push_back(g.mean.at(rows[i].heads));
        }
      r.ranked_gt = position.size();
      r.tau = kendall_tau(position, truth);
    }
    for (const auto& row : rows) {
      if (o.pick == "decoded" && !row.hard_rules) continue;
      r.pick = row.heads;
      break;
    }
    r.pick_in_gt = g.mean.count(r.pick) > 0;
    const std::map<uint64_t, double>* from_scratch = r.pick_in_gt ? &gt_loss.at(r.pick)
                                                     : retrained.count(r.pick) ? &retrained.at(r.pick) : nullptr;
    if (from_scratch) {
      r.pick_vs_best = paired(*from_scratch, gt_loss.at(best), o.confidence);
      r.pick_trained = r.pick_vs_best.seeds >= 2;
      r.in_band = r.pick_trained && (r.pick == best || contains_zero(r.pick_vs_best.ci));
      if (!g.best_allowed.empty()) {
        r.pick_vs_allowed = paired(*from_scratch, gt_loss.at(g.best_allowed), o.confidence);
        r.in_allowed_band = r.pick_vs_allowed.seeds >= 2 && (r.pick == g.best_allowed || contains_zero(r.pick_vs_allowed.ci));
      }
    }
    const SearchCost k = search_cost(plan);
    // Flops in the ground truth's units: the search's run has the same model and recipe (checked by the note below).
    const double scale = g.run_flops / k.run_flops;
    if (std::abs(scale - 1) > 1e-6)
      e.notes.push_back(fmt::format("{}: one plain run of its config costs {:.3e} FLOPs, one ground-truth run {:.3e}",
                                    dir, k.run_flops, g.run_flops));
    double search = k.search_flops();
    if (ft)  // what the fine-tuning trained and evaluated, in place of what search.finetune planned
      search += ft->tokens * k.train_flops_per_token +
                static_cast<double>(ft->evaluations) * static_cast<double>(plan.config.train.eval_tokens) *
                    k.train_flops_per_token / 3 -
                k.finetune_flops;
    const double retrain = static_cast<double>(g.seeds.size()) * k.run_flops;
    r.search_share = search / grid_flops;
    r.total_share = (search + retrain) / grid_flops;
    r.budget_runs = (search + retrain) / k.run_flops;
    results.push_back(r);
  }
  e.searches.columns = {"search", "method", "seed", "ranking", "gt_schedules_ranked", "kendall_tau", "kendall_tau_shared",
                        "kendall_tau_estimate",
                        "pick", "pick_in_ground_truth", "pick_diff_vs_best", "pick_ci_lo", "pick_ci_hi", "pick_in_top_band",
                        "pick_diff_vs_best_allowed", "pick_allowed_ci_lo", "pick_allowed_ci_hi", "pick_in_allowed_band",
                        "search_share_of_grid", "with_retraining_share_of_grid"};
  for (const auto& r : results)
    e.searches.add({r.dir, r.method, static_cast<int64_t>(r.seed), r.ranking, static_cast<int64_t>(r.ranked_gt), r.tau,
                    r.tau_shared, r.tau_estimate,
                    label(r.pick), static_cast<int64_t>(r.pick_in_gt), r.pick_vs_best.diff, r.pick_vs_best.ci.lo,
                    r.pick_vs_best.ci.hi, r.pick_trained ? Cell(static_cast<int64_t>(r.in_band)) : Cell(),
                    r.pick_vs_allowed.diff, r.pick_vs_allowed.ci.lo, r.pick_vs_allowed.ci.hi,
                    r.pick_trained && !g.best_allowed.empty() ? Cell(static_cast<int64_t>(r.in_allowed_band)) : Cell(),
                    r.search_share, r.total_share});

  // Per method.
  e.methods.columns = {"method", "searches", "tau_mean", "tau_ci_lo", "tau_ci_hi", "picks_in_band", "picks_retrained",
                       "picks_in_allowed_band", "with_retraining_share_of_grid", "budget_runs"};
  std::map<std::string, std::vector<const SearchResult*>> by_method;
  for (const auto& r : results) by_method[r.method].push_back(&r);
  std::string targets;
  for (const auto& [method, rs] : by_method) {
    std::vector<double> taus, shares, budgets;
    int64_t in_band = 0, trained = 0, in_allowed_band = 0;
    for (const auto* r : rs) {
      taus.push_back(r->tau);
      shares.push_back(r->total_share);
      budgets.push_back(r->budget_runs);
      in_band += r->in_band;
      trained += r->pick_trained;
      in_allowed_band += r->in_allowed_band;
    }
    const Interval ti = mean_interval(taus, o.confidence);
    e.methods.add({method, static_cast<int64_t>(rs.size()), mean_of(taus), ti.lo, ti.hi, in_band, trained,
                   g.best_allowed.empty() ? Cell() : Cell(in_allowed_band), mean_of(shares), mean_of(budgets)});
    targets += fmt::format(
        "| {} | tau {} {} over {} searches: {} | {} of {} picks in the top band: {} | {:.1f}% of the grid: {} |\n", method,
        num(mean_of(taus), "{:.3f}"), interval(ti, "{:.3f}"), rs.size(),
        mean_of(taus) >= 0.6 ? "met" : fmt::format("missed by {:.3f}", 0.6 - mean_of(taus)), in_band, rs.size(),
        in_band >= 2 ? "met" : "missed", 100 * mean_of(shares), mean_of(shares) <= 0.25 ? "met" : "missed");
  }

  // Baselines at the same compute.
  e.baselines.columns = {"baseline", "budget_runs", "share_of_grid", "pick_in_top_band", "mean_regret"};
  for (const auto& [method, rs] : by_method) {
    std::vector<double> budgets;
    for (const auto* r : rs) budgets.push_back(r->budget_runs);
    const auto b = static_cast<size_t>(std::floor(mean_of(budgets)));
    const auto [band, regret] = random_search(g, gt_loss, b);
    // A budget past the ground truth's schedules trains each of them once (random_search clamps it).
    const size_t n = g.schedules.size();
    const std::string drawn = b > n ? fmt::format("all {} schedules, 1 seed each; the budget exceeds them", n)
                                    : fmt::format("{} schedules, 1 seed each", b);
    e.baselines.add({fmt::format("random search at {}'s budget of {} runs ({})", method, b, drawn),
                     static_cast<int64_t>(b), static_cast<double>(b) / static_cast<double>(n * g.seeds.size()),
                     band, regret});
  }
  for (const auto& dir : o.halving) {
    const Runs h = read_sweep(dir);
    // The pick: the configuration with the most final-rung seeds (the last rung's), then the best mean.
    const Heads* pick = nullptr;
    size_t most = 0;
    double pick_loss = std::numeric_limits<double>::infinity();
    for (const auto& [heads, by_seed] : h.loss) {
      const double m = mean_loss(by_seed);
      if (by_seed.size() > most || (by_seed.size() == most && m < pick_loss)) {
        most = by_seed.size();
        pick_loss = m;
        pick = &heads;
      }
    }
    const double share = h.tokens_all_rungs * g.flops_per_token / grid_flops;
    const bool known = pick && g.mean.count(*pick);
    e.baselines.add({fmt::format("successive halving ({}): pick {}", dir, pick ? label(*pick) : "-"),
                     share * static_cast<double>(g.schedules.size() * g.seeds.size()), share,
                     known ? Cell(static_cast<double>(g.band.count(*pick))) : Cell(),
                     known ? Cell(g.mean.at(*pick) - g.mean.at(best)) : Cell()});
  }

  // The markdown.
  std::string& md = e.markdown;
  md += fmt::format("### Ground truth ({} schedules x {} paired seeds: {})\n\n", g.schedules.size(), g.seeds.size(),
                    o.ground_truth);
  md += fmt::format("Spread from best ({}) to worst ({}): {:.4f} nats; paired {:.0f}% interval of worst - best {}, "
                    "half-width {:.4f}: the spread is {:.1f}x the half-width (needed: 5x). Top band (paired interval "
                    "against the best contains 0): {} schedule{}.\n\n",
                    label(best), label(worst), g.mean.at(worst) - g.mean.at(best), 100 * o.confidence,
                    interval(spread.ci), half, (g.mean.at(worst) - g.mean.at(best)) / half, g.band.size(),
                    g.band.size() == 1 ? "" : "s");
  md += fmt::format("The ground truth's own agreement: each seed's ranking against the mean of the other {} seeds' has "
                    "Kendall tau {:.3f} on average (per seed: {:.3f}). A single seed ranks the schedules only that well; "
                    "a search's tau against the {}-seed means is read against it.\n\n",
                    g.seeds.size() - 1, mean_of(g.seed_tau), fmt::join(g.seed_tau, ", "), g.seeds.size());
  if (g.best_allowed.empty()) {
    md += "Rules 1-3 allow none of these schedules.\n\n";
  } else if (g.best_allowed != best) {
    const Paired& a = g.vs_best.at(g.best_allowed);
    md += fmt::format("The best breaks a hard rule. Rules 1-3 allow {} of the {} schedules; the best of them, {}, is {} {} "
                      "from the best{}.\n\n",
                      g.allowed.size(), g.schedules.size(), label(g.best_allowed), num(a.diff, "{:+.4f}"),
                      interval(a.ci), g.band.count(g.best_allowed) ? ", in the top band" : ", outside the top band");
  }
  md += "| rank | schedule | val loss | vs best (paired) | 95% CI | top band |\n|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < g.schedules.size(); ++i) {
    const Heads& h = g.schedules[i];
    md += fmt::format("| {} | {} | {:.4f} | {} | {} | {} |\n", i + 1, label(h), g.mean.at(h), num(g.vs_best.at(h).diff, "{:+.4f}"),
                      interval(g.vs_best.at(h).ci), g.band.count(h) ? "yes" : "");
  }
  md += "\n### Searches\n\nEach search is judged by its fine-tuned ranking where it has one (RUN/finetune: its schedules "
        "trained briefly from the shared weights), else by its held-out loss under the shared weights; tau (shared) "
        "is the latter's, tau (estimate) a mixture's architecture weights'.\n\n"
        "| search | method | seed | ranked by | tau | tau (shared) | tau (estimate) | pick | pick vs best (from scratch) | in band | share of grid (with retraining) |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results)
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {}{} | {} {} | {} | {:.1f}% ({:.1f}%) |\n", fs::path(r.dir).filename().string(),
                      r.method, r.seed, r.ranking, num(r.tau, "{:.3f}"), num(r.tau_shared, "{:.3f}"), num(r.tau_estimate, "{:.3f}"), label(r.pick),
                      r.pick_in_gt ? "" : " (outside the ground truth)", num(r.pick_vs_best.diff, "{:+.4f}"),
                      interval(r.pick_vs_best.ci), r.pick_trained ? (r.in_band ? "yes" : "no") : "not retrained",
                      100 * r.search_share, 100 * r.total_share);
  if (o.pick == "decoded" && !g.best_allowed.empty() && g.best_allowed != best) {
    md += fmt::format("\nA decoded pick obeys rules 1-3, so it is also judged against the best schedule they allow ({}): "
                      "the band there is the schedules whose paired interval against {} contains 0.\n\n"
                      "| search | pick | vs {} (from scratch) | in that band |\n|---|---|---|---|\n",
                      label(g.best_allowed), label(g.best_allowed), label(g.best_allowed));
    for (const auto& r : results)
      md += fmt::format("| {} | {} | {} {} | {} |\n", fs::path(r.dir).filename().string(), label(r.pick),
                        num(r.pick_vs_allowed.diff, "{:+.4f}"), interval(r.pick_vs_allowed.ci),
                        r.pick_trained ? (r.in_allowed_band ? "yes" : "no") : "not retrained");
  }
  md += "\n### Targets\n\n| method | Kendall tau >= 0.6 | pick in the top band in >= 2 of 3 | search + retraining <= 25% |\n|---|---|---|---|\n";
  md += targets;
  md += "\n### Baselines at the same compute\n\n| baseline | budget (runs) | share of grid | pick in top band | mean regret (nats) |\n|---|---|---|---|---|\n";
  for (const auto& row : e.baselines.rows) {
    auto cell = [](const Cell& c, const char* f) {
      if (const double* d = std::get_if<double>(&c)) return num(*d, f);
      if (const int64_t* i = std::get_if<int64_t>(&c)) return std::to_string(*i);
      if (const std::string* s = std::get_if<std::string>(&c)) return *s;
      return std::string("-");
    };
    md += fmt::format("| {} | {} | {} | {} | {} |\n", cell(row[0], ""), cell(row[1], "{:.1f}"), cell(row[2], "{:.3f}"),
                      cell(row[3], "{:.2f}"), cell(row[4], "{:+.4f}"));
  }
  for (const auto& n : e.notes) md += "\nnote: " + n + "\n";
  return e;
}

void write_evidence(const Evidence& e, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create the directory: {}", ec.message()), dir, "check the path and permissions");
  write_file_atomic((fs::path(dir) / "ground_truth.csv").string(), to_csv(e.ground_truth));
  write_file_atomic((fs::path(dir) / "searches.csv").string(), to_csv(e.searches));
  write_file_atomic((fs::path(dir) / "methods.csv").string(), to_csv(e.methods));
  write_file_atomic((fs::path(dir) / "baselines.csv").string(), to_csv(e.baselines));
  write_file_atomic((fs::path(dir) / "evidence.md").string(), e.markdown);
}

}  // namespace prism
