// The search evidence, computed: each search judged against the ground truth, the methods
// summarised and the baselines at their compute, as tables. Inputs: search_evidence_inputs.cpp;
// the markdown: search_evidence_markdown.cpp.
#include "prism/analysis/search_evidence.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "prism/analysis/search_evidence_detail.h"
#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/schedule/rules.h"
#include "prism/search/search.h"

namespace fs = std::filesystem;

namespace prism {
namespace evidence {

Paired paired(const LossBySeed& a, const LossBySeed& b, double confidence) {
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

namespace {

// Tau of the search's shared-weights ranking (its loss, and a mixture's estimate) over the ground truth's schedules.
void shared_tau(const std::vector<RankedRow>& shared, const GroundTruth& g, SearchResult& r) {
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
}

// The fine-tuned ranking: the schedules it fine-tuned first, in its order; any others after them, in
// the shared order. Its tau is judged by position.
std::vector<RankedRow> finetuned_rows(const FinetuneRanking& ft, const std::vector<RankedRow>& shared,
                                      const ModelConfig& m, const GroundTruth& g, SearchResult& r) {
  // Searches are judged together only when fine-tuned alike: the recipe is part of the method's name.
  r.method += " + fine-tune (" + ft.recipe + ")";
  r.ranking = "fine-tuned: " + ft.describe;
  std::vector<RankedRow> rows;
  for (const auto& h : ft.order) {
    RankedRow x;
    x.heads = h;
    x.loss = ft.loss.at(h);
    x.hard_rules = check_schedule(HeadSchedule(h), m.n_layer, m.d_model, m.n_head).ok();
    rows.push_back(x);
  }
  for (const auto& row : shared)
    if (!ft.loss.count(row.heads)) rows.push_back(row);
  std::vector<double> position, truth;
  for (size_t i = 0; i < rows.size(); ++i)
    if (g.mean.count(rows[i].heads) && std::isfinite(rows[i].loss)) {
      position.push_back(static_cast<double>(i));
      truth.push_back(g.mean.at(rows[i].heads));
    }
  r.ranked_gt = position.size();
  r.tau = kendall_tau(position, truth);
  return rows;
}

// The pick, trained from scratch: its paired difference to the best (and to the best rules 1-3 allow).
void judge_pick(const std::vector<RankedRow>& rows, const EvidenceOptions& o, const GroundTruth& g,
                const std::map<Heads, LossBySeed>& retrained, SearchResult& r) {
  for (const auto& row : rows) {
    if (o.pick == "decoded" && !row.hard_rules) continue;
    r.pick = row.heads;
    break;
  }
  r.pick_in_gt = g.mean.count(r.pick) > 0;
  const LossBySeed* from_scratch = r.pick_in_gt ? &g.loss.at(r.pick) : retrained.count(r.pick) ? &retrained.at(r.pick) : nullptr;
  if (!from_scratch) return;
  r.pick_vs_best = paired(*from_scratch, g.loss.at(g.best()), o.confidence);
  r.pick_trained = r.pick_vs_best.seeds >= 2;
  r.in_band = r.pick_trained && (r.pick == g.best() || contains_zero(r.pick_vs_best.ci));
  if (!g.best_allowed.empty()) {
    r.pick_vs_allowed = paired(*from_scratch, g.loss.at(g.best_allowed), o.confidence);
    r.in_allowed_band = r.pick_vs_allowed.seeds >= 2 && (r.pick == g.best_allowed || contains_zero(r.pick_vs_allowed.ci));
  }
}

// The search's compute, with the fine-tuning it ran and the pick retrained on the ground truth's seeds.
void judge_cost(const SearchPlan& plan, const std::optional<FinetuneRanking>& ft, const GroundTruth& g,
                SearchResult& r, std::vector<std::string>& notes) {
  const SearchCost k = search_cost(plan);
  // Flops in the ground truth's units: the search's run has the same model and recipe (checked by the note below).
  const double scale = g.run_flops / k.run_flops;
  if (std::abs(scale - 1) > 1e-6)
    notes.push_back(fmt::format("{}: one plain run of its config costs {:.3e} FLOPs, one ground-truth run {:.3e}", r.dir,
                                k.run_flops, g.run_flops));
  double search = k.search_flops();
  if (ft)  // what the fine-tuning trained and evaluated, in place of what search.finetune planned
    search += ft->tokens * k.train_flops_per_token +
              static_cast<double>(ft->evaluations) * static_cast<double>(plan.config.train.eval_tokens) *
                  k.train_flops_per_token / 3 -
              k.finetune_flops;
  const double retrain = static_cast<double>(g.seeds.size()) * k.run_flops;
  r.search_share = search / g.grid_flops();
  r.total_share = (search + retrain) / g.grid_flops();
  r.budget_runs = (search + retrain) / k.run_flops;
}

SearchResult judge_search(const std::string& dir, const EvidenceOptions& o, const GroundTruth& g,
                          const std::map<Heads, LossBySeed>& retrained, std::vector<std::string>& notes) {
  SearchResult r;
  r.dir = dir;
  const SearchPlan plan = search_plan_of(dir);
  note_vocabulary(dir, plan.config, notes);
  r.method = method_name(plan.settings.method);
  r.seed = plan.settings.seed;
  const std::vector<RankedRow> shared = read_ranking(dir);
  shared_tau(shared, g, r);
  const std::optional<FinetuneRanking> ft = o.ranking == "finetuned" ? read_finetune(dir) : std::nullopt;
  const std::vector<RankedRow> rows = ft ? finetuned_rows(*ft, shared, plan.config.model, g, r) : shared;
  judge_pick(rows, o, g, retrained, r);
  judge_cost(plan, ft, g, r, notes);
  return r;
}

std::vector<MethodSummary> summarize_methods(const std::vector<SearchResult>& results, const Heads& g_best,
                                             double confidence) {
  std::map<std::string, std::vector<const SearchResult*>> by_method;
  for (const auto& r : results) by_method[r.method].push_back(&r);
  std::vector<MethodSummary> out;
  for (const auto& [method, rs] : by_method) {
    MethodSummary m;
    m.method = method;
    m.searches = rs.size();
    std::vector<double> taus, shares, budgets, regrets;
    for (const auto* r : rs) {
      taus.push_back(r->tau);
      shares.push_back(r->total_share);
      budgets.push_back(r->budget_runs);
      m.in_band += r->in_band;
      m.trained += r->pick_trained;
      m.in_allowed_band += r->in_allowed_band;
      m.picks_best += r->pick == g_best;
      if (r->pick_trained) regrets.push_back(r->pick_vs_best.diff);
    }
    m.regret_n = regrets.size();
    m.regret = mean_of(regrets);
    if (regrets.size() >= 2) m.regret_ci = mean_interval(regrets, confidence);
    m.tau_mean = mean_of(taus);
    m.tau_ci = mean_interval(taus, confidence);
    m.share = mean_of(shares);
    m.budget_runs = mean_of(budgets);
    out.push_back(m);
  }
  return out;
}

// From-scratch baselines at each method's budget, then each successive-halving sweep.
std::vector<Baseline> baselines(const GroundTruth& g, const std::vector<MethodSummary>& methods,
                                const std::vector<std::string>& halving) {
  std::vector<Baseline> out;
  const size_t n = g.schedules.size();
  std::map<int64_t, std::vector<std::string>> by_budget;  // methods of one budget in whole runs share its baselines
  for (const auto& m : methods) by_budget[static_cast<int64_t>(std::floor(m.budget_runs))].push_back(m.method);
  for (const auto& [budget, names] : by_budget)
    for (auto& b : from_scratch_baselines(g, static_cast<double>(budget), fmt::format("{}", fmt::join(names, ", "))))
      out.push_back(std::move(b));
  for (const auto& dir : halving) {
    const Runs h = read_sweep(dir);
    // The pick: the configuration with the most final-rung seeds (the last rung's), then the best mean.
    const Heads* pick = nullptr;
    size_t most = 0;
    double pick_loss = std::numeric_limits<double>::infinity();
    for (const auto& [heads, by_seed] : h.loss) {
      const double mean = mean_loss(by_seed);
      if (by_seed.size() > most || (by_seed.size() == most && mean < pick_loss)) {
        most = by_seed.size();
        pick_loss = mean;
        pick = &heads;
      }
    }
    const double share = h.tokens_all_rungs * g.flops_per_token / g.grid_flops();
    const bool known = pick && g.mean.count(*pick);
    Baseline b;
    b.name = fmt::format("successive halving ({}): pick {}", dir, pick ? label(*pick) : "-");
    b.budget_runs = share * static_cast<double>(n * g.seeds.size());
    b.share = share;
    b.draws = 1;
    if (known) {
      b.in_band = static_cast<double>(g.band.count(*pick));
      b.regret = g.mean.at(*pick) - g.mean.at(g.best());
      b.p_best = *pick == g.best() ? 1 : 0;
    }
    out.push_back(b);
  }
  return out;
}

void fill_tables(const EvidenceData& d, Evidence& e) {
  const GroundTruth& g = d.g;
  e.ground_truth.columns = {"rank", "schedule", "heads", "seeds", "val_loss", "diff_vs_best", "ci_lo", "ci_hi", "top_band"};
  for (size_t i = 0; i < g.schedules.size(); ++i) {
    const Heads& h = g.schedules[i];
    const Paired& p = g.vs_best.at(h);
    e.ground_truth.add({static_cast<int64_t>(i + 1), label(h), fmt::format("{}", fmt::join(h, " ")),
                        static_cast<int64_t>(g.seeds.size()), g.mean.at(h), p.diff, p.ci.lo, p.ci.hi,
                        static_cast<int64_t>(g.band.count(h))});
  }
  e.searches.columns = {"search", "method", "seed", "ranking", "gt_schedules_ranked", "kendall_tau", "kendall_tau_shared",
                        "kendall_tau_estimate",
                        "pick", "pick_in_ground_truth", "pick_diff_vs_best", "pick_ci_lo", "pick_ci_hi", "pick_in_top_band",
                        "pick_diff_vs_best_allowed", "pick_allowed_ci_lo", "pick_allowed_ci_hi", "pick_in_allowed_band",
                        "search_share_of_grid", "with_retraining_share_of_grid"};
  for (const auto& r : d.searches)
    e.searches.add({r.dir, r.method, static_cast<int64_t>(r.seed), r.ranking, static_cast<int64_t>(r.ranked_gt), r.tau,
                    r.tau_shared, r.tau_estimate, label(r.pick), static_cast<int64_t>(r.pick_in_gt), r.pick_vs_best.diff,
                    r.pick_vs_best.ci.lo, r.pick_vs_best.ci.hi, r.pick_trained ? Cell(static_cast<int64_t>(r.in_band)) : Cell(),
                    r.pick_vs_allowed.diff, r.pick_vs_allowed.ci.lo, r.pick_vs_allowed.ci.hi,
                    r.pick_trained && !g.best_allowed.empty() ? Cell(static_cast<int64_t>(r.in_allowed_band)) : Cell(),
                    r.search_share, r.total_share});
  e.methods.columns = {"method", "searches", "tau_mean", "tau_ci_lo", "tau_ci_hi", "picks_in_band", "picks_retrained",
                       "picks_in_allowed_band", "with_retraining_share_of_grid", "budget_runs", "picks_best",
                       "mean_regret", "regret_ci_lo", "regret_ci_hi"};
  for (const auto& m : d.methods)
    e.methods.add({m.method, static_cast<int64_t>(m.searches), m.tau_mean, m.tau_ci.lo, m.tau_ci.hi, m.in_band, m.trained,
                   g.best_allowed.empty() ? Cell() : Cell(m.in_allowed_band), m.share, m.budget_runs, m.picks_best,
                   m.regret, m.regret_ci.lo, m.regret_ci.hi});
  e.baselines.columns = {"baseline",  "budget_runs", "share_of_grid", "seeds_per_schedule", "schedules", "draws",
                         "sampled",   "p_pick_best", "pick_in_top_band", "mean_regret", "regret_lo", "regret_hi",
                         "tau_mean",  "tau_lo", "tau_hi"};
  auto count = [](int64_t v) { return v > 0 ? Cell(v) : Cell(); };  // NaN doubles are empty cells already
  for (const auto& b : d.baselines)
    e.baselines.add({b.name, b.whole_runs ? Cell(static_cast<int64_t>(b.budget_runs)) : Cell(b.budget_runs), b.share,
                     count(b.seeds_per_schedule), count(b.schedules), count(b.draws), static_cast<int64_t>(b.sampled),
                     b.p_best, b.in_band, b.regret, b.regret_lo, b.regret_hi, b.tau, b.tau_lo, b.tau_hi});
}

}  // namespace
}  // namespace evidence

Evidence evaluate_search(const EvidenceOptions& o) {
  using namespace evidence;
  if (o.pick != "decoded" && o.pick != "unconstrained")
    throw Error("unknown pick '" + o.pick + "'", "search evidence", "use decoded or unconstrained");
  if (o.ranking != "finetuned" && o.ranking != "shared")
    throw Error("unknown ranking '" + o.ranking + "'", "search evidence",
                "use finetuned (a search's fine-tuned ranking where RUN/finetune has one) or shared");
  const EvidenceTargets& t = o.targets;
  if (!(t.tau >= -1 && t.tau <= 1) || !(t.band >= 0 && t.band <= 1) || !(t.share > 0) || !(t.spread > 0))
    throw Error(fmt::format("targets tau {} band {} share {} spread {}", t.tau, t.band, t.share, t.spread), "search evidence",
                "give --target-tau in [-1, 1], --target-band and --target-share as shares (0.667, 0.25), --target-spread > 0");
  EvidenceData d;
  d.g = read_ground_truth(o.ground_truth, o.confidence, d.notes);
  std::map<Heads, LossBySeed> retrained;
  for (const auto& dir : o.retrained)
    for (const auto& [h, by_seed] : read_sweep(dir).loss)
      for (const auto& [s, v] : by_seed) retrained[h].emplace(s, v);
  for (const auto& dir : o.searches) d.searches.push_back(judge_search(dir, o, d.g, retrained, d.notes));
  d.methods = summarize_methods(d.searches, d.g.best(), o.confidence);
  d.baselines = baselines(d.g, d.methods, o.halving);
  Evidence e;
  fill_tables(d, e);
  e.markdown = render_evidence(d, o);
  e.notes = d.notes;
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
