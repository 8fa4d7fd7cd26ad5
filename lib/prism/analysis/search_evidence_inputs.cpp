// The inputs of the search evidence: sweep directories' summary.csv, searches' ranking.csv and
// fine-tuning sweeps, read into search_evidence_detail.h's structures.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>

#include <yaml-cpp/yaml.h>

#include "prism/analysis/search_evidence_detail.h"
#include "prism/config/config.h"
#include "prism/config/cost.h"
#include "prism/error.h"
#include "prism/schedule/rules.h"
#include "prism/search/search.h"
#include "prism/sweep/plan.h"

namespace fs = std::filesystem;

namespace prism::evidence {

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

size_t column(const CsvFile& f, const std::string& name, const std::string& path) {
  for (size_t i = 0; i < f.header.size(); ++i)
    if (f.header[i] == name) return i;
  throw Error(fmt::format("no column '{}'", name), path, "pass a file written by this version of prism");
}

// A "heads" cell: "[1, 1, 4]" (summary.csv) or "32 8" (ranking.csv).
Heads heads_of(const std::string& cell) { return HeadSchedule::parse(cell).heads(); }

// The seeds every schedule has: the paired design.
std::set<uint64_t> common_seeds(const Runs& runs) {
  std::set<uint64_t> common;
  bool first = true;
  for (const auto& kv : runs.loss) {
    std::set<uint64_t> s;
    for (const auto& seed_loss : kv.second) s.insert(seed_loss.first);
    if (first) {
      common = s;
    } else {
      std::set<uint64_t> both;
      std::set_intersection(common.begin(), common.end(), s.begin(), s.end(), std::inserter(both, both.begin()));
      common = both;
    }
    first = false;
  }
  return common;
}

}  // namespace

std::string label(const Heads& h) { return HeadSchedule(h).compact(); }

SearchPlan search_plan_of(const std::string& dir) {
  const std::string v = run_vocabulary(dir);
  return plan_search((fs::path(dir) / "search.yaml").string(),
                     v.empty() ? std::vector<std::string>{} : std::vector<std::string>{"model.vocab_size=" + v});
}

void note_vocabulary(const std::string& what, const Config& c, std::vector<std::string>& notes) {
  if (c.vocab_source.rfind("the preset's", 0) == 0)
    notes.push_back(fmt::format("{}: costed with {} token ids, {}; run the report where its data is prepared "
                                "(data.dir is read from the working directory)",
                                what, c.model.vocab_size, c.vocab_source));
}

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
    auto& by_seed = r.loss[heads_of(row[c_heads])];
    by_seed.emplace(std::stoull(row[c_seed]), std::stod(row[c_loss]));
  }
  return r;
}

double mean_loss(const std::map<uint64_t, double>& by_seed) {
  double s = 0;
  for (const auto& kv : by_seed) s += kv.second;
  return s / static_cast<double>(by_seed.size());
}

namespace {

// Each seed's ranking against the mean of the other seeds' (GroundTruth::seed_tau).
std::vector<double> seed_agreement(const GroundTruth& g) {
  std::vector<double> taus;
  for (uint64_t s : g.seeds) {
    std::vector<double> one, rest;
    for (const auto& h : g.schedules) {
      double sum = 0;
      for (uint64_t o : g.seeds)
        if (o != s) sum += g.loss.at(h).at(o);
      one.push_back(g.loss.at(h).at(s));
      rest.push_back(sum / static_cast<double>(g.seeds.size() - 1));
    }
    taus.push_back(kendall_tau(one, rest));
  }
  return taus;
}

// The cost of one of its runs, from its resolved trials (every schedule costs the same: neutrality),
// and the schedules rules 1-3 allow at its model.
void cost_and_rules(const std::string& dir, GroundTruth& g, std::vector<std::string>& notes) {
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
}

}  // namespace

GroundTruth read_ground_truth(const std::string& dir, double confidence, std::vector<std::string>& notes) {
  const Runs runs = read_sweep(dir);
  const std::set<uint64_t> common = common_seeds(runs);
  if (runs.loss.size() < 2 || common.size() < 2)
    throw Error(fmt::format("{} schedules with {} seeds common to all of them", runs.loss.size(), common.size()), dir,
                "train at least 2 schedules with the same 2 or more seeds to completion");
  GroundTruth g;
  g.seeds.assign(common.begin(), common.end());
  for (const auto& [h, by_seed] : runs.loss) {
    for (uint64_t s : common) g.loss[h][s] = by_seed.at(s);
    if (by_seed.size() > common.size())
      notes.push_back(fmt::format("{}: {} seeds beyond the {} every schedule has are left out", label(h),
                                  by_seed.size() - common.size(), common.size()));
    g.schedules.push_back(h);
    g.mean[h] = mean_loss(g.loss[h]);
  }
  std::sort(g.schedules.begin(), g.schedules.end(), [&](const Heads& a, const Heads& b) { return g.mean[a] < g.mean[b]; });
  for (const auto& h : g.schedules) {
    g.vs_best[h] = paired(g.loss.at(h), g.loss.at(g.best()), confidence);
    if (h == g.best() || contains_zero(g.vs_best[h].ci)) g.band.insert(h);
  }
  g.seed_tau = seed_agreement(g);
  cost_and_rules(dir, g, notes);
  return g;
}

std::vector<RankedRow> read_ranking(const std::string& dir) {
  const std::string path = (fs::path(dir) / "ranking.csv").string();
  if (!fs::exists(path)) throw Error("no ranking.csv", dir, "pass the directory of a prism search that completed");
  const CsvFile f = read_csv(path);
  const size_t c_heads = column(f, "heads", path), c_loss = column(f, "loss", path),
               c_est = column(f, "estimate", path), c_rules = column(f, "hard_rules", path);
  std::vector<RankedRow> out;
  for (const auto& row : f.rows) {
    RankedRow r;
    r.heads = heads_of(row[c_heads]);
    r.loss = row[c_loss].empty() ? kNaN : std::stod(row[c_loss]);
    r.estimate = row[c_est].empty() ? kNaN : std::stod(row[c_est]);
    r.hard_rules = row[c_rules] == "1";
    out.push_back(r);
  }
  return out;
}

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
    rows.push_back({heads_of(row[c_heads]), rung, std::stod(row[c_loss])});
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

}  // namespace prism::evidence
