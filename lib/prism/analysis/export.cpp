#include "prism/analysis/export.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "prism/analysis/distance_delta.h"
#include "prism/analysis/distance_profile.h"
#include "prism/error.h"
#include "prism/store/run_reader.h"
#include "prism/store/run_unigram.h"
#include "prism/train/position_loss.h"

namespace prism {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<std::string> kRunColumns = {"run", "heads", "seed"};

std::vector<std::string> with_run_columns(std::vector<std::string> rest) {
  std::vector<std::string> cols = kRunColumns;
  cols.insert(cols.end(), rest.begin(), rest.end());
  return cols;
}

std::vector<Cell> run_cells(const RunEntry& e, const RunReader& r) {
  return {e.name, heads_cell(r.attributes().heads), static_cast<int64_t>(r.attributes().seed)};
}

template <class... T>
std::vector<Cell> row(std::vector<Cell> head, T... rest) {
  (head.push_back(Cell{rest}), ...);
  return head;
}

// Runs that have a run.h5; trials without one are noted and skipped.
std::vector<std::pair<const RunEntry*, RunReader>> open_runs(const RunSet& set, Table& t) {
  std::vector<std::pair<const RunEntry*, RunReader>> out;
  for (const auto& e : set.runs) {
    if (e.h5.empty()) {
      t.notes.push_back(fmt::format("{}: no run.h5 yet (status {}), skipped", e.name,
                                    e.index.count("status") ? e.index.at("status") : "unknown"));
      continue;
    }
    out.emplace_back(&e, RunReader(e.h5));
  }
  return out;
}

Table loss_table(const RunSet& set) {
  Table t;
  t.columns = with_run_columns({"step", "tokens", "loss", "lr", "grad_norm", "time_s"});
  for (auto& [e, r] : open_runs(set, t))
    for (const auto& x : r.train()) t.add(row(run_cells(*e, r), x.step, x.tokens, x.loss, x.lr, x.grad_norm, x.time_s));
  return t;
}

Table val_table(const RunSet& set) {
  Table t;
  t.columns = with_run_columns({"step", "tokens", "loss", "loss_se", "unigram_val_loss"});
  for (auto& [e, r] : open_runs(set, t)) {
    const double unigram = run_unigram_val_loss(r.attributes());
    for (const auto& x : r.val())
      t.add(row(run_cells(*e, r), x.step, x.tokens, x.loss, x.loss_se, unigram));
  }
  return t;
}

Table distance_table(const RunSet& set) {
  Table t;
  t.columns = with_run_columns({"source", "step", "layer", "layer_heads", "head", "distance", "distance_normalized"});
  for (auto& [e, r] : open_runs(set, t)) {
    const auto& heads = r.attributes().heads;
    AttentionSeries s = r.attention();
    bool any = !s.step.empty();
    for (size_t i = 0; i < s.step.size(); ++i)
      for (size_t l = 0; l < heads.size(); ++l)
        for (size_t k = 0; k < s.per_head[i][l].size(); ++k)
          t.add(row(run_cells(*e, r), std::string("train"), s.step[i], int64_t(l), int64_t(heads[l]), int64_t(k),
                    s.per_head[i][l][k], kNaN));
    if (r.has_group("attention/heldout")) {
      any = true;
      DistanceProfile p = read_profile(r, false);
      auto per_head = p.per_head();
      auto normalized = p.per_head_normalized();
      for (size_t l = 0; l < heads.size(); ++l)
        for (size_t k = 0; k < per_head[l].size(); ++k)
          t.add(row(run_cells(*e, r), std::string("heldout"), p.step, int64_t(l), int64_t(heads[l]), int64_t(k),
                    per_head[l][k], normalized[l][k]));
    }
    if (!any) t.notes.push_back(fmt::format("{}: no attention-distance data", e->name));
  }
  if (t.rows.empty())
    throw Error("none of the runs has attention-distance data", set.runs.empty() ? "" : set.runs.front().h5,
                "train with train.distance_every > 0, or measure: prism distance RUN --data DIR");
  return t;
}

Table position_table(const RunSet& set) {
  Table t;
  t.columns = with_run_columns({"step", "layer", "layer_heads", "head", "bin", "position_lo", "position_hi", "distance"});
  for (auto& [e, r] : open_runs(set, t)) {
    if (!r.has_group("attention/heldout")) {
      t.notes.push_back(fmt::format("{}: no held-out distance profile (prism distance)", e->name));
      continue;
    }
    DistanceProfile p = read_profile(r, false);
    for (size_t l = 0; l < p.layers(); ++l)
      for (size_t k = 0; k < p.by_position[l].size(); ++k)
        for (size_t b = 0; b + 1 < p.bin_edges.size(); ++b)
          t.add(row(run_cells(*e, r), p.step, int64_t(l), int64_t(p.heads[l]), int64_t(k), int64_t(b), p.bin_edges[b],
                    p.bin_edges[b + 1] - 1, p.by_position[l][k][b]));
  }
  if (t.rows.empty())
    throw Error("none of the runs has a held-out distance profile", set.runs.empty() ? "" : set.runs.front().h5,
                "measure it: prism distance RUN --data DIR");
  return t;
}

// Every /val/by_position/T<context> of each run (train/position_loss.h): one row per bucket.
Table loss_by_position_table(const RunSet& set) {
  Table t;
  t.columns = with_run_columns({"context", "trained_context", "position", "step", "bucket", "position_lo",
                                "position_hi", "loss", "loss_se", "batches", "dtype"});
  for (auto& [e, r] : open_runs(set, t)) {
    const auto contexts = r.groups_under("val/by_position");
    if (contexts.empty()) t.notes.push_back(fmt::format("{}: no loss by position (prism eval RUN --position-loss)", e->name));
    std::vector<PositionLoss> all;
    for (const auto& c : contexts)
      all.push_back(position_loss_from_group(r.read_group("val/by_position/" + c), r.path() + ":/val/by_position/" + c));
    std::sort(all.begin(), all.end(), [](const PositionLoss& a, const PositionLoss& b) { return a.context < b.context; });
    for (const auto& p : all) {
      const auto loss = p.loss(), se = p.loss_se();
      for (int64_t b = 0; b < p.buckets(); ++b)
        t.add(row(run_cells(*e, r), p.context, p.trained_context, p.position, p.step, b, p.bucket_edges[b],
                  p.bucket_edges[b + 1] - 1, loss[static_cast<size_t>(b)], se[static_cast<size_t>(b)], p.batches(),
                  p.dtype));
    }
  }
  if (t.rows.empty())
    throw Error("none of the runs has a loss by position", set.runs.empty() ? "" : set.runs.front().h5,
                "train with this prism (it stores one at the end), or measure it: prism eval RUN --position-loss");
  return t;
}

std::string join_names(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : "+") + s;
  return out;
}

void add_delta_rows(Table& t, const DistanceDelta& d, const std::string& prism, const std::string& baseline,
                    const std::string& source) {
  for (const auto& r : d.rows)
    t.add({prism, heads_cell(d.heads), baseline, heads_cell(d.baseline_heads), source, int64_t(r.layer),
           int64_t(r.heads), int64_t(r.baseline_heads), r.prism, r.baseline, r.delta, r.batch_ci.lo, r.batch_ci.hi,
           r.seed_ci.lo, r.seed_ci.hi, d.confidence, d.batches, int64_t(d.prism_runs.size()),
           int64_t(d.baseline_runs.size()), r.prism_normalized, r.baseline_normalized, r.delta_normalized,
           r.batch_ci_normalized.lo, r.batch_ci_normalized.hi, r.seed_ci_normalized.lo, r.seed_ci_normalized.hi,
           d.seed_method, int64_t(d.seed_pairs), r.seed_p, r.seed_p_normalized});
}

bool is_uniform(const std::vector<int>& heads) {
  return std::all_of(heads.begin(), heads.end(), [&](int h) { return h == heads.front(); });
}

std::string source_of(const std::vector<DistanceProfile>& ps) {
  for (const auto& p : ps)
    if (p.backend == "training-time") return "train";
  return "heldout";
}

// A run measured for Delta D_l.
struct Measured {
  std::string name;
  std::vector<int> heads;
  std::string key;  // grid values other than schedule and seed
  DistanceProfile profile;
};

// Each run's distance profile (read_profile; with training_rows, the training-time one where no held-out
// one is stored, and a run with neither is a note in t rather than an error).
std::vector<Measured> measure_runs(const RunSet& s, bool training_rows, Table& t) {
  std::vector<Measured> out;
  for (auto& [e, r] : open_runs(s, t)) {
    std::string key;
    for (const auto& c : s.param_columns) key += c + "=" + (e->index.count(c) ? e->index.at(c) : "") + ";";
    try {
      out.push_back({e->name, r.attributes().heads, key, read_profile(r, training_rows)});
    } catch (const Error& err) {
      if (!training_rows) throw;
      t.notes.push_back(fmt::format("{}: {}", e->name, err.what_part()));
    }
  }
  return out;
}

std::vector<DistanceProfile> profiles_of(const std::vector<Measured>& m) {
  std::vector<DistanceProfile> out;
  for (const auto& x : m) out.push_back(x.profile);
  return out;
}

std::vector<std::string> names_of(const std::vector<Measured>& m) {
  std::vector<std::string> out;
  for (const auto& x : m) out.push_back(x.name);
  return out;
}

// The rows of `prism` pooled against `base` pooled.
void add_measured_delta(Table& t, const std::vector<Measured>& prism, const std::vector<Measured>& base,
                        double confidence) {
  auto p = profiles_of(prism), b = profiles_of(base);
  add_delta_rows(t, distance_delta(p, b, confidence), join_names(names_of(prism)), join_names(names_of(base)),
                 source_of(p) == "heldout" && source_of(b) == "heldout" ? "heldout" : "train");
}

// Runs, not a sweep, without --baseline: the Delta D_l each run stored (prism distance --baseline).
void add_stored_deltas(const RunSet& set, Table& t) {
  for (auto& [e, r] : open_runs(set, t)) {
    if (!r.has_group("attention/delta")) {
      t.notes.push_back(fmt::format("{}: no stored Delta D_l", e->name));
      continue;
    }
    DistanceDelta d = delta_from_group(r.read_group("attention/delta"), r.path());
    add_delta_rows(t, d, e->name, join_names(d.baseline_runs), "heldout");
  }
}

// A sweep: each schedule against the uniform runs with the same other grid values.
void add_sweep_deltas(const RunSet& set, double confidence, Table& t) {
  auto all = measure_runs(set, true, t);
  std::map<std::pair<std::string, std::vector<int>>, std::vector<Measured>> groups;
  for (auto& m : all) groups[{m.key, m.heads}].push_back(m);
  for (const auto& [key, members] : groups) {
    if (is_uniform(key.second)) continue;
    const std::vector<Measured>* base = nullptr;
    for (const auto& [k2, m2] : groups)
      if (k2.first == key.first && is_uniform(k2.second) && k2.second.size() == key.second.size()) base = &m2;
    if (!base) {
      t.notes.push_back(fmt::format("{}: no uniform baseline with the same grid values", join_names(names_of(members))));
      continue;
    }
    add_measured_delta(t, members, *base, confidence);
  }
}

Table delta_table(const RunSet& set, const ExportOptions& o) {
  Table t;
  t.columns = {"run",       "heads",       "baseline",    "baseline_heads", "source",     "layer",
               "layer_heads", "baseline_layer_heads", "prism", "baseline_distance", "delta", "batch_ci_lo",
               "batch_ci_hi", "seed_ci_lo", "seed_ci_hi",  "confidence",    "batches",    "prism_runs",
               "baseline_runs", "prism_normalized", "baseline_normalized", "delta_normalized",
               "batch_ci_normalized_lo", "batch_ci_normalized_hi", "seed_ci_normalized_lo", "seed_ci_normalized_hi",
               "seed_method", "seed_pairs", "seed_p", "seed_p_normalized"};
  if (!o.baseline.empty()) {
    auto prism = measure_runs(set, true, t), base = measure_runs(find_runs(o.baseline), true, t);
    add_measured_delta(t, prism, base, o.confidence);
    return t;
  }
  if (!set.sweep) {
    add_stored_deltas(set, t);
    if (t.rows.empty())
      throw Error("no Delta D_l stored in these runs", set.runs.empty() ? "" : set.runs.front().h5,
                  "pass the uniform baseline with --baseline RUN, or run prism distance RUN --baseline BASE --data DIR");
    return t;
  }
  add_sweep_deltas(set, o.confidence, t);
  if (t.rows.empty())
    throw Error("no schedule could be paired with a uniform baseline", set.runs.empty() ? "" : set.runs.front().h5,
                "the sweep needs uniform runs (schedule 'uniform') with the same other grid values");
  return t;
}

Table eval_table(const RunSet& set) {
  Table t;
  t.columns = with_run_columns({"task", "acc", "acc_norm", "n", "acc_stderr", "acc_norm_stderr", "acc_bytes",
                                "acc_bytes_stderr"});
  for (auto& [e, r] : open_runs(set, t)) {
    auto entries = r.eval();
    if (entries.empty()) t.notes.push_back(fmt::format("{}: no /eval results", e->name));
    const std::string& path = r.path();  // C++17 lambdas cannot capture a structured binding (clang refuses)
    for (const auto& x : entries) {
      auto scalar = [&](const char* name) -> Cell {
        return x.values.has(name) ? Cell{x.values.reals(name, path).at(0)} : Cell{kNaN};
      };
      Cell n = x.values.has("n") ? Cell{x.values.integers("n", r.path()).at(0)} : Cell{};
      t.add(row(run_cells(*e, r), x.task, scalar("acc"), scalar("acc_norm"), n, scalar("acc_stderr"),
                scalar("acc_norm_stderr"), scalar("acc_bytes"), scalar("acc_bytes_stderr")));
    }
  }
  return t;
}

Table summary_table(const RunSet& set) {
  Table t;
  t.columns = with_run_columns({"status", "steps", "tokens", "train_loss", "val_loss", "val_loss_se",
                                "unigram_val_loss", "best_val_loss", "best_val_step", "time_s"});
  // Eval tasks and summary.csv columns become extra columns.
  std::vector<std::string> tasks;
  std::vector<std::vector<Cell>> rows;
  std::vector<std::map<std::string, double>> eval_cells;
  std::vector<const RunEntry*> entries;
  for (const auto& e : set.runs) {
    std::vector<Cell> r{e.name, e.index.count("heads") ? Cell{e.index.at("heads")} : Cell{},
                        e.index.count("seed") ? Cell{e.index.at("seed")} : Cell{}};
    std::map<std::string, double> evals;
    if (e.h5.empty()) {
      r.push_back(e.index.count("status") ? Cell{e.index.at("status")} : Cell{});
      r.resize(t.columns.size());
    } else {
      RunReader reader(e.h5);
      r = run_cells(e, reader);
      auto train = reader.train();
      auto val = reader.val();
      std::optional<ValRow> best;
      for (const auto& v : val)
        if (!best || v.loss < best->loss) best = v;
      r.push_back(reader.status());
      r.push_back(train.empty() ? Cell{} : Cell{train.back().step});
      r.push_back(train.empty() ? Cell{} : Cell{train.back().tokens});
      r.push_back(train.empty() ? Cell{} : Cell{train.back().loss});
      r.push_back(val.empty() ? Cell{} : Cell{val.back().loss});
      r.push_back(val.empty() ? Cell{} : Cell{val.back().loss_se});
      r.push_back(Cell{run_unigram_val_loss(reader.attributes())});
      r.push_back(best ? Cell{best->loss} : Cell{});
      r.push_back(best ? Cell{best->step} : Cell{});
      r.push_back(train.empty() ? Cell{} : Cell{train.back().time_s});
      for (const auto& x : reader.eval()) {
        if (std::find(tasks.begin(), tasks.end(), x.task) == tasks.end()) tasks.push_back(x.task);
        if (x.values.has("acc")) evals[x.task + "_acc"] = x.values.reals("acc", reader.path()).at(0);
        if (x.values.has("acc_norm")) evals[x.task + "_acc_norm"] = x.values.reals("acc_norm", reader.path()).at(0);
      }
    }
    rows.push_back(std::move(r));
    eval_cells.push_back(std::move(evals));
    entries.push_back(&e);
  }
  std::vector<std::string> extra;
  for (const auto& task : tasks) extra.insert(extra.end(), {task + "_acc", task + "_acc_norm"});
  const size_t eval_end = t.columns.size() + extra.size();
  for (const auto& c : set.index_columns)
    if (std::find(t.columns.begin(), t.columns.end(), c) == t.columns.end() &&
        std::find(extra.begin(), extra.end(), c) == extra.end())
      extra.push_back(c);
  t.columns.insert(t.columns.end(), extra.begin(), extra.end());
  for (size_t i = 0; i < rows.size(); ++i) {
    auto r = rows[i];
    for (size_t c = r.size(); c < t.columns.size(); ++c) {
      const std::string& name = t.columns[c];
      if (c < eval_end) {
        auto it = eval_cells[i].find(name);
        r.push_back(it == eval_cells[i].end() ? Cell{} : Cell{it->second});
      } else {
        auto it = entries[i]->index.find(name);
        r.push_back(it == entries[i]->index.end() ? Cell{} : Cell{it->second});
      }
    }
    t.add(std::move(r));
  }
  return t;
}

}  // namespace

const std::vector<std::string>& export_what_names() {
  static const std::vector<std::string> names = {"loss", "val",     "distance", "position",
                                                 "delta", "eval", "summary",  "loss_by_position"};
  return names;
}

ExportWhat parse_export_what(const std::string& name) {
  const auto& names = export_what_names();
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw Error(fmt::format("unknown export '{}'", name), "--what",
                fmt::format("use one of: {}", fmt::join(names, ", ")));
  return static_cast<ExportWhat>(it - names.begin());
}

std::string heads_cell(const std::vector<int>& heads) { return fmt::format("{}", fmt::join(heads, ",")); }

Table export_table(const RunSet& runs, ExportWhat what, const ExportOptions& options) {
  switch (what) {
    case ExportWhat::Loss: return loss_table(runs);
    case ExportWhat::Val: return val_table(runs);
    case ExportWhat::Distance: return distance_table(runs);
    case ExportWhat::Position: return position_table(runs);
    case ExportWhat::Delta: return delta_table(runs, options);
    case ExportWhat::Eval: return eval_table(runs);
    case ExportWhat::Summary: return summary_table(runs);
    case ExportWhat::LossByPosition: return loss_by_position_table(runs);
  }
  throw Error("unknown export", "--what", "use one of the documented names");
}

}  // namespace prism
