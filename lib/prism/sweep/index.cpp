#include "prism/sweep/index.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/store/result_file.h"
#include "prism/sweep/run_result.h"
#include "prism/sweep/sweep_dir.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string param_value(const Trial& t, const std::string& key) {
  for (const auto& [k, v] : t.params)
    if (k == key) return v;
  return "";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(double v, int decimals = 6) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "";
}

// --- sweep.h5 ------------------------------------------------------------------

// Equal-length columns under `group/` of `out`, one value per row of `rows`.
template <class Row>
class Columns {
 public:
  Columns(ResultGroup& out, std::string group, const std::vector<Row>& rows)
      : out_(out), group_(std::move(group)), rows_(rows) {}
  template <class F> void strings(const std::string& name, F value) {
    out_.set_strings(path(name), {rows_.size()}, collect<std::string>(value));
  }
  template <class F> void int32(const std::string& name, F value) {
    out_.set_int32(path(name), {rows_.size()}, collect<int32_t>(value));
  }
  template <class F> void int64(const std::string& name, F value) {
    out_.set_integer(path(name), {rows_.size()}, collect<int64_t>(value));
  }
  template <class F> void uint64(const std::string& name, F value) {
    out_.set_uint64(path(name), {rows_.size()}, collect<uint64_t>(value));
  }
  template <class F> void float64(const std::string& name, F value) {
    out_.set_real(path(name), {rows_.size()}, collect<double>(value));
  }

 private:
  template <class T, class F> std::vector<T> collect(F value) const {
    std::vector<T> v;
    v.reserve(rows_.size());
    for (const Row& r : rows_) v.push_back(static_cast<T>(value(r)));
    return v;
  }
  std::string path(const std::string& name) const { return group_ + "/" + name; }
  ResultGroup& out_;
  std::string group_;
  const std::vector<Row>& rows_;
};

// /trials: one row per trial, with /trials/param/<key> per grid key and the heads as a matrix.
void add_trials(ResultGroup& out, const SweepPlan& plan, const std::vector<TrialOutcome>& outcomes) {
  using O = TrialOutcome;
  Columns<O> c(out, "trials", outcomes);
  c.strings("name", [](const O& o) { return o.trial->name; });
  c.strings("group", [](const O& o) { return o.trial->group; });
  c.strings("schedule", [](const O& o) { return o.trial->schedule.compact(); });
  c.strings("status", [](const O& o) { return o.status; });
  c.strings("message", [](const O& o) { return o.message; });
  c.strings("run_dir", [](const O& o) { return o.run_dir; });
  for (const auto& key : param_columns(plan))
    c.strings("param/" + key, [&](const O& o) { return param_value(*o.trial, key); });
  c.uint64("seed", [](const O& o) { return o.trial->seed; });
  c.int32("baseline", [](const O& o) { return o.trial->baseline; });
  c.int32("rung", [](const O& o) { return o.rung; });
  c.int32("n_layer", [](const O& o) { return o.trial->schedule.n_layer(); });
  c.int64("steps", [](const O& o) { return o.steps; });
  c.int64("tokens", [](const O& o) { return o.tokens; });
  c.int64("tokens_all_rungs", [](const O& o) { return o.tokens_all; });
  c.float64("best_val_loss", [](const O& o) { return o.best_val; });
  c.float64("final_val_loss", [](const O& o) { return o.final_val; });
  c.float64("final_val_loss_se", [](const O& o) { return o.final_val_se; });
  c.float64("unigram_val_loss", [](const O& o) { return o.unigram; });
  c.strings("dtype", [](const O& o) { return o.dtype; });
  c.float64("wall_s", [](const O& o) { return o.wall_s; });
  c.float64("wall_s_all_rungs", [](const O& o) { return o.wall_all; });
  size_t width = 1;  // a sweep of 0-layer models still has a heads column
  for (const auto& o : outcomes) width = std::max(width, o.trial->schedule.heads().size());
  std::vector<int32_t> heads(outcomes.size() * width, 0);  // shorter schedules padded with 0
  for (size_t i = 0; i < outcomes.size(); ++i)
    std::copy(outcomes[i].trial->schedule.heads().begin(), outcomes[i].trial->schedule.heads().end(),
              heads.begin() + static_cast<long>(i * width));
  out.set_int32("trials/heads", {outcomes.size(), width}, heads);
}

// /ranking: the ranked configurations.
void add_ranking(ResultGroup& out, const std::vector<RankRow>& rows) {
  using R = RankRow;
  Columns<R> c(out, "ranking", rows);
  c.strings("group", [](const R& r) { return r.group; });
  c.strings("schedule", [](const R& r) { return r.schedule; });
  c.strings("params", [](const R& r) { return fmt::format("{}", fmt::join(r.params, " ")); });
  c.int32("seeds_done", [](const R& r) { return r.seeds_done; });
  c.int32("seeds_total", [](const R& r) { return r.seeds_total; });
  c.int32("baseline", [](const R& r) { return r.baseline; });
  c.float64("val_loss_mean", [](const R& r) { return r.mean; });
  c.float64("val_loss_std", [](const R& r) { return r.std; });
  c.float64("diff_to_baseline", [](const R& r) { return r.diff_to_baseline; });
}

// /halving: every promotion decision, and the rung budgets.
void add_halving(ResultGroup& out, const SweepPlan& plan, const std::vector<PromotionDecision>& decisions) {
  using D = PromotionDecision;
  Columns<D> c(out, "halving", decisions);
  c.int32("rung", [](const D& d) { return d.rung; });
  c.int64("steps", [](const D& d) { return d.steps; });
  c.strings("group", [](const D& d) { return d.group; });
  c.float64("val_loss", [](const D& d) { return d.val_loss; });
  c.int32("rank", [](const D& d) { return d.rank; });
  c.int32("promoted", [](const D& d) { return d.promoted; });
  c.strings("reason", [](const D& d) { return d.reason; });
  const auto budgets = rung_budgets(plan.trials.at(0).max_steps, plan.settings.halving);
  out.set_integer("halving/budgets", {budgets.size()}, budgets);
}

// sweep.h5: the index as h5py reads it (trials, ranking, halving, and the resolved sweep).
ResultGroup index_file(const SweepPlan& plan, const std::vector<TrialOutcome>& outcomes,
                       const std::vector<RankRow>& rows, const std::vector<PromotionDecision>& decisions,
                       const std::string& sweep_yaml) {
  ResultGroup out;
  out.text["name"] = plan.settings.name;
  out.text["source"] = plan.source;
  out.text["sweep"] = sweep_yaml;
  out.text["prism_version"] = PRISM_VERSION;
  add_trials(out, plan, outcomes);
  add_ranking(out, rows);
  if (plan.settings.halving.enabled) add_halving(out, plan, decisions);
  return out;
}

}  // namespace

std::vector<std::string> param_columns(const SweepPlan& plan) {
  std::vector<std::string> out;
  for (const auto& a : plan.axes)
    if (a != "schedule" && a != "train.seed") out.push_back(a);
  return out;
}

std::vector<TrialOutcome> collect_outcomes(const SweepPlan& plan, const std::string& sweep_dir,
                                           const std::vector<PromotionDecision>& decisions) {
  const bool halving = plan.settings.halving.enabled;
  std::vector<int64_t> budgets;
  if (halving && !plan.trials.empty()) budgets = rung_budgets(plan.trials[0].max_steps, plan.settings.halving);
  std::vector<TrialOutcome> out;
  for (const auto& t : plan.trials) {
    TrialOutcome o;
    o.trial = &t;
    o.status = "pending";
    o.best_val = o.final_val = o.final_val_se = o.unigram = kNaN;
    o.budget_steps = halving ? budgets[0] : t.max_steps;
    o.run_dir = fs::path(run_dir(sweep_dir, t, 0, halving)).lexically_relative(sweep_dir).string();
    const int rungs = halving ? static_cast<int>(budgets.size()) : 1;
    for (int k = 0; k < rungs; ++k) {
      const std::string rd = run_dir(sweep_dir, t, k, halving);
      const fs::path h5 = fs::path(rd) / "run.h5";
      if (!fs::exists(h5) && !fs::exists(fs::path(rd) / "trial.json")) continue;
      const RunInspection ins = inspect_run(rd);
      o.rung = k;
      o.budget_steps = halving ? budgets[static_cast<size_t>(k)] : t.max_steps;
      o.run_dir = fs::path(rd).lexically_relative(sweep_dir).string();
      o.message = ins.record.message;
      switch (ins.state) {
        case RunState::Completed: o.status = "completed"; break;
        case RunState::Failed: o.status = "failed"; break;
        case RunState::Resumable:
        case RunState::Restart: o.status = ins.record.status == "running" ? "running" : "interrupted"; break;
        case RunState::Pending: o.status = "pending"; break;
      }
      o.steps = o.tokens = 0;
      o.best_val = o.final_val = o.final_val_se = kNaN;
      o.wall_s = ins.record.wall_s;
      if (!ins.h5_status.empty() && ins.h5_status != "unreadable") {
        const RunResult r = read_run_result(h5.string());
        o.steps = r.steps;
        o.tokens = r.tokens;
        o.best_val = r.best_val_loss();
        o.final_val = o.status == "completed" ? r.final_val_loss() : kNaN;
        o.final_val_se = o.status == "completed" ? r.final_val_loss_se() : kNaN;
        o.unigram = r.unigram_val_loss;
        o.dtype = r.dtype;
        if (o.wall_s == 0) o.wall_s = r.train_time_s;
      }
      o.tokens_all += o.tokens;
      o.wall_all += o.wall_s;
    }
    if (halving && o.status == "completed" && o.rung + 1 < static_cast<int>(budgets.size())) {
      for (const auto& d : decisions)
        if (d.rung == o.rung && d.group == t.group && !d.promoted) {
          o.status = "pruned";
          o.message = fmt::format("stopped by successive halving after rung {} ({} steps): {}, rank {}", d.rung,
                                  d.steps, d.reason, d.rank);
        }
    }
    // With halving.rung_seeds, a seed beyond the first rungs' runs only at the last rung: when its
    // configuration was stopped before that, it never runs.
    if (halving && o.status == "pending")
      for (const auto& d : decisions)
        if (d.group == t.group && !d.promoted) {
          o.status = "pruned";
          o.message = fmt::format("not run: its configuration was stopped by successive halving after rung {} ({} "
                                  "steps, seeds {} of the grid): {}, rank {}",
                                  d.rung, d.steps, plan.settings.halving.rung_seeds, d.reason, d.rank);
        }
    out.push_back(o);
  }
  return out;
}

std::vector<RankRow> rank_configurations(const SweepPlan& plan, const std::vector<TrialOutcome>& outcomes) {
  const auto columns = param_columns(plan);
  std::map<std::string, RankRow> rows;
  std::map<std::string, std::vector<double>> values;
  std::vector<std::string> order;
  for (const auto& o : outcomes) {
    const Trial& t = *o.trial;
    if (!rows.count(t.group)) {
      RankRow r;
      r.group = t.group;
      r.schedule = schedule_label(t);
      for (const auto& c : columns) r.params.push_back(param_value(t, c));
      r.baseline = t.baseline;
      rows[t.group] = r;
      order.push_back(t.group);
    }
    rows[t.group].seeds_total += 1;
    if (o.status == "completed" && o.budget_steps == t.max_steps && std::isfinite(o.final_val))
      values[t.group].push_back(o.final_val);
  }
  std::vector<RankRow> out;
  std::map<std::string, double> baseline_mean;  // by the other values
  for (const auto& g : order) {
    const auto& v = values[g];
    if (v.empty()) continue;
    RankRow r = rows[g];
    r.seeds_done = static_cast<int>(v.size());
    double sum = 0;
    for (double x : v) sum += x;
    r.mean = sum / static_cast<double>(v.size());
    double ss = 0;
    for (double x : v) ss += (x - r.mean) * (x - r.mean);
    r.std = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : kNaN;
    if (r.baseline) baseline_mean[fmt::format("{}", fmt::join(r.params, "\x1f"))] = r.mean;
    out.push_back(r);
  }
  for (auto& r : out) {
    auto it = baseline_mean.find(fmt::format("{}", fmt::join(r.params, "\x1f")));
    r.diff_to_baseline = it == baseline_mean.end() ? kNaN : r.mean - it->second;
  }
  std::stable_sort(out.begin(), out.end(), [](const RankRow& a, const RankRow& b) { return a.mean < b.mean; });
  return out;
}

std::string format_ranking(const SweepPlan& plan, const std::vector<RankRow>& rows,
                           const std::vector<TrialOutcome>& outcomes) {
  const auto columns = param_columns(plan);
  std::vector<std::string> header{"rank", "schedule"};
  header.insert(header.end(), columns.begin(), columns.end());
  header.insert(header.end(), {"seeds", "val loss (mean ± std)", "vs baseline"});
  std::vector<std::vector<std::string>> table{header};
  for (size_t i = 0; i < rows.size(); ++i) {
    const RankRow& r = rows[i];
    std::vector<std::string> line{std::to_string(i + 1), r.schedule};
    line.insert(line.end(), r.params.begin(), r.params.end());
    line.push_back(fmt::format("{}/{}", r.seeds_done, r.seeds_total));
    line.push_back(std::isfinite(r.std) ? fmt::format("{:.4f} ± {:.4f}", r.mean, r.std)
                                        : fmt::format("{:.4f} ±      -", r.mean));
    line.push_back(r.baseline ? "baseline"
                              : std::isfinite(r.diff_to_baseline) ? fmt::format("{:+.4f}", r.diff_to_baseline) : "-");
    table.push_back(line);
  }
  // Column widths in characters (the ± sign is one character, two bytes).
  auto width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  std::vector<size_t> w(header.size(), 0);
  for (const auto& line : table)
    for (size_t c = 0; c < line.size(); ++c) w[c] = std::max(w[c], width(line[c]));
  std::ostringstream os;
  os << fmt::format("sweep {}: configurations ranked by final validation loss (mean over seeds, at {} steps)\n",
                    plan.settings.name, plan.trials.empty() ? 0 : plan.trials[0].max_steps);
  for (const auto& line : table) {
    for (size_t c = 0; c < line.size(); ++c) {
      const bool right = c == 0 || c + 1 >= line.size() - 1;
      const std::string pad(w[c] - width(line[c]), ' ');
      os << (c ? "  " : "") << (right ? pad + line[c] : line[c] + pad);
    }
    os << "\n";
  }
  if (rows.empty()) os << "(no configuration has finished at the full budget yet)\n";
  os << format_baselines(outcomes);
  std::map<std::string, int> counts;
  for (const auto& o : outcomes) counts[o.status]++;
  std::vector<std::string> parts;
  for (const char* s : {"completed", "pruned", "failed", "interrupted", "running", "pending"})
    if (counts[s]) parts.push_back(fmt::format("{} {}", counts[s], s));
  os << fmt::format("trials: {}\n", fmt::join(parts, ", "));
  for (const auto& o : outcomes)
    if (o.status == "failed") os << fmt::format("  failed: {}: {}\n", o.trial->name, o.message);
  return os.str();
}

std::string format_baselines(const std::vector<TrialOutcome>& outcomes) {
  std::vector<std::string> unigrams;
  std::vector<double> ses;
  std::map<std::string, int> dtypes;  // completed runs per dtype they trained in
  for (const auto& o : outcomes) {
    if (o.status != "completed") continue;
    const std::string u = std::isfinite(o.unigram) ? fmt::format("{:.4f}", o.unigram) : "unknown";
    if (std::find(unigrams.begin(), unigrams.end(), u) == unigrams.end()) unigrams.push_back(u);
    if (std::isfinite(o.final_val_se)) ses.push_back(o.final_val_se);
    if (!o.dtype.empty()) dtypes[o.dtype] += 1;
  }
  if (unigrams.empty()) return "";
  std::string out = fmt::format("unigram baseline {} nats{}", fmt::join(unigrams, ", "),
                                unigrams == std::vector<std::string>{"unknown"} ? " (the data has no prepare.json)"
                                                                                : " (the loss of a model that ignores context)");
  if (!ses.empty()) {
    double lo = *std::min_element(ses.begin(), ses.end()), hi = *std::max_element(ses.begin(), ses.end());
    out += lo == hi || fmt::format("{:.4f}", lo) == fmt::format("{:.4f}", hi)
               ? fmt::format("; a run's final val loss has a standard error of {:.4f} over its validation batches", hi)
               : fmt::format("; a run's final val loss has a standard error of {:.4f}-{:.4f} over its validation "
                             "batches", lo, hi);
  }
  if (dtypes.size() == 1) out += fmt::format("; every run trained in {}", dtypes.begin()->first);
  if (dtypes.size() > 1) {
    std::vector<std::string> counts;
    for (const auto& [dtype, n] : dtypes) counts.push_back(fmt::format("{} {}", n, dtype));
    out += fmt::format("\nwarning: the runs trained in different dtypes ({}; summary.csv's dtype column): this ranking "
                       "pools their seeds, prism report keeps each dtype apart (another study)",
                       fmt::join(counts, ", "));
  }
  return out + "\n";
}

void write_index(const SweepPlan& plan, const std::string& sweep_dir, const std::vector<TrialOutcome>& outcomes,
                 const std::vector<RankRow>& rows, const std::vector<PromotionDecision>& decisions) {
  const fs::path dir(sweep_dir);
  const auto columns = param_columns(plan);
  std::ostringstream csv;
  csv << "name,group,schedule,heads,seed";
  for (const auto& c : columns) csv << "," << csv_field(c);
  csv << ",status,rung,steps,tokens,best_val_loss,final_val_loss,wall_s,tokens_all_rungs,wall_s_all_rungs,"
         "final_val_loss_se,unigram_val_loss,dtype,run_dir,message\n";
  for (const auto& o : outcomes) {
    const Trial& t = *o.trial;
    csv << csv_field(t.name) << "," << csv_field(t.group) << "," << csv_field(schedule_label(t)) << ","
        << csv_field(t.schedule.list()) << "," << t.seed;
    for (const auto& c : columns) csv << "," << csv_field(param_value(t, c));
    csv << "," << o.status << "," << o.rung << "," << o.steps << "," << o.tokens << "," << number(o.best_val) << ","
        << number(o.final_val) << "," << number(o.wall_s, 2) << "," << o.tokens_all << ","
        << number(o.wall_all, 2) << "," << number(o.final_val_se) << "," << number(o.unigram) << ","
        << o.dtype << "," << csv_field(o.run_dir) << "," << csv_field(o.message) << "\n";
  }
  write_file_atomic((dir / "summary.csv").string(), csv.str());
  write_file_atomic((dir / "ranking.txt").string(), format_ranking(plan, rows, outcomes));
  if (plan.settings.halving.enabled) {
    std::ostringstream h;
    h << "rung,steps,group,val_loss,rank,promoted,reason\n";
    for (const auto& d : decisions)
      h << d.rung << "," << d.steps << "," << csv_field(d.group) << "," << number(d.val_loss) << "," << d.rank << ","
        << (d.promoted ? 1 : 0) << "," << csv_field(d.reason) << "\n";
    write_file_atomic((dir / "halving.csv").string(), h.str());
  }
  std::ifstream in((dir / "sweep.yaml").string());
  std::stringstream yaml;
  yaml << in.rdbuf();
  try {
    write_result_file((dir / "sweep.h5").string(), index_file(plan, outcomes, rows, decisions, yaml.str()),
                      "the sweep index");
  } catch (const Error& e) {
    throw Error(e.what_part(), e.where(), "check free disk space and permissions; rerun the sweep to rebuild the index");
  }
}

}  // namespace prism
