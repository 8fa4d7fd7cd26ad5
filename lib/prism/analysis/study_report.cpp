#include "prism/analysis/study_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "prism/analysis/export.h"
#include "prism/analysis/throughput_bench.h"
#include "prism/atomic_file.h"
#include "prism/config/model_config.h"
#include "prism/error.h"
#include "prism/schedule/head_schedule.h"
#include "prism/store/result_file.h"
#include "prism/store/table_group.h"
#include "prism/train/execution.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> finite(const std::vector<double>& x) {
  std::vector<double> out;
  for (double v : x)
    if (std::isfinite(v)) out.push_back(v);
  return out;
}

LossSummary loss_summary(const StudyConfig& c, double confidence) {
  LossSummary s;
  std::vector<double> x, se;
  for (const auto* r : c.runs) {
    x.push_back(r->final_val());
    se.push_back(r->final_val_se());
  }
  x = finite(x);
  s.seeds = static_cast<int>(x.size());
  s.mean = mean_of(x);
  s.sd = sample_sd(x);
  s.ci = mean_interval(x, confidence);
  s.val_se = mean_of(finite(se));
  return s;
}

// Values of two configurations matched by seed: (seed, this, baseline).
template <class F>
std::vector<std::pair<uint64_t, std::pair<double, double>>> by_seed(const StudyConfig& c, const StudyConfig& base,
                                                                   F value) {
  std::vector<std::pair<uint64_t, std::pair<double, double>>> out;
  for (const auto* r : c.runs)
    for (const auto* b : base.runs)
      if (r->seed == b->seed && std::isfinite(value(*r)) && std::isfinite(value(*b)))
        out.push_back({r->seed, {value(*r), value(*b)}});
  return out;
}

PairedDiff loss_difference(const StudyConfig& c, const StudyConfig& base, double confidence, double margin) {
  PairedDiff d;
  d.seeds = by_seed(c, base, [](const StudyRun& r) { return r.final_val(); });
  d.pairs = static_cast<int>(d.seeds.size());
  std::vector<double> diffs;
  for (const auto& [seed, v] : d.seeds) diffs.push_back(v.first - v.second);
  std::vector<double> a, b;
  for (const auto* r : c.runs) a.push_back(r->final_val());
  for (const auto* r : base.runs) b.push_back(r->final_val());
  a = finite(a);
  b = finite(b);
  d.runs = static_cast<int>(a.size());
  d.baseline_runs = static_cast<int>(b.size());
  d.p = d.p_holm = kNaN;
  d.sd = d.mde = d.mde_holm = d.tost_p = d.tost_p_holm = kNaN;
  d.margin = margin;
  d.ci = {kNaN, kNaN};
  if (d.pairs >= 2) {
    d.method = "paired";
    d.mean = mean_of(diffs);
    d.ci = mean_interval(diffs, confidence);
    d.p = mean_p_value(diffs);
    d.sd = sample_sd(diffs);
    d.tost_p = tost_p_value(diffs, margin);
  } else if (a.size() >= 2 && b.size() >= 2) {
    d.method = "welch";  // fewer than 2 seeds pair up: the runs of each side, unpaired
    d.mean = mean_of(a) - mean_of(b);
    d.ci = welch_interval(a, b, confidence);
    d.p = welch_p_value(a, b);
  } else {
    d.method = d.pairs == 1 ? "one pair" : "no pairs";
    d.mean = d.pairs == 1 ? diffs.front() : mean_of(a) - mean_of(b);
  }
  return d;
}

// Per bucket of query positions: the mean loss over the runs and, with a baseline, the
// difference paired by seed. Empty unless every run (of both) has the same buckets.
std::vector<PositionCell> position_cells(const StudyConfig& c, const StudyConfig* base, double confidence) {
  std::vector<PositionCell> out;
  if (c.runs.empty() || !c.runs.front()->by_position) return out;
  const std::vector<int64_t>& edges = c.runs.front()->by_position->bucket_edges;
  // Each run's bucket losses by seed, once; none when a run lacks them or has other buckets.
  auto losses = [&](const StudyConfig& k, std::map<uint64_t, std::vector<double>>& by_seed) {
    for (const auto* r : k.runs) {
      if (!r->by_position || r->by_position->bucket_edges != edges) return false;
      by_seed[r->seed] = r->by_position->loss();
    }
    return true;
  };
  std::map<uint64_t, std::vector<double>> mine, theirs;
  if (!losses(c, mine)) return out;
  const bool paired = base && !base->runs.empty() && losses(*base, theirs);
  for (size_t b = 0; b + 1 < edges.size(); ++b) {
    PositionCell cell;
    cell.lo = edges[b];
    cell.hi = edges[b + 1];
    std::vector<double> values, diffs;
    for (const auto& [seed, loss] : mine) {
      values.push_back(loss[b]);
      if (paired && theirs.count(seed)) diffs.push_back(loss[b] - theirs.at(seed)[b]);
    }
    cell.seeds = static_cast<int>(values.size());
    cell.loss = mean_of(values);
    cell.loss_ci = mean_interval(values, confidence);
    cell.pairs = static_cast<int>(diffs.size());
    cell.diff = diffs.empty() ? kNaN : mean_of(diffs);
    cell.diff_ci = diffs.size() >= 2 ? mean_interval(diffs, confidence) : Interval{kNaN, kNaN};
    cell.p = diffs.size() >= 2 ? mean_p_value(diffs) : kNaN;
    out.push_back(cell);
  }
  return out;
}

// The first crossing of `level` by a validation curve: (step, tokens), linearly
// interpolated between the evaluations around it; NaN when it never gets there.
std::pair<double, double> crossing(const std::vector<ValRow>& val, double level) {
  for (size_t i = 0; i < val.size(); ++i) {
    if (!(val[i].loss <= level)) continue;
    if (i == 0) return {static_cast<double>(val[0].step), static_cast<double>(val[0].tokens)};
    const ValRow& a = val[i - 1];
    const ValRow& b = val[i];
    const double f = a.loss == b.loss ? 1.0 : (a.loss - level) / (a.loss - b.loss);
    return {a.step + f * static_cast<double>(b.step - a.step), a.tokens + f * static_cast<double>(b.tokens - a.tokens)};
  }
  return {kNaN, kNaN};
}

// A configuration's mean validation loss at each evaluation step that all its runs have.
std::vector<std::pair<int64_t, double>> mean_curve(const StudyConfig& c) {
  std::map<int64_t, std::vector<double>> at;
  for (const auto* r : c.runs)
    for (const auto& v : r->val) at[v.step].push_back(v.loss);
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& [step, xs] : at)
    if (xs.size() == c.runs.size()) out.push_back({step, mean_of(xs)});
  return out;
}

void milestone_levels(ScaleReport& s, const ReportOptions& o) {
  const StudyScale& sc = *s.scale;
  const StudyConfig* ref = nullptr;
  for (const auto& c : sc.configs)
    if (c.uniform) {
      ref = &c;
      break;
    }
  if (!ref) ref = &sc.configs.front();
  const auto curve = mean_curve(*ref);
  // The lowest level: the highest final loss of any run, so every run reaches every level.
  double worst_final = -std::numeric_limits<double>::infinity();
  for (const auto& c : sc.configs)
    for (const auto* r : c.runs)
      if (std::isfinite(r->final_val())) worst_final = std::max(worst_final, r->final_val());
  if (curve.empty() || !std::isfinite(worst_final)) return;
  const double start_step = o.milestone_start * static_cast<double>(ref->max_steps());
  double high = curve.back().second;
  int64_t high_step = curve.back().first;
  for (const auto& [step, loss] : curve)
    if (static_cast<double>(step) >= start_step) {
      high = loss;
      high_step = step;
      break;
    }
  const int k = std::max(1, o.milestones);
  const std::string lowest = fmt::format("{:.4f} (the highest final loss of any run here, so every run reaches it)",
                                         worst_final);
  const std::string how = "; steps and tokens are where each run's validation curve first reaches a level, "
                          "interpolated linearly between its evaluations, averaged over seeds";
  if (k == 1 || !(high > worst_final)) {
    s.levels = {worst_final};
    s.levels_rule = fmt::format("one level, {}", lowest) + how;
    return;
  }
  for (int i = 0; i < k; ++i) s.levels.push_back(high - (high - worst_final) * i / (k - 1));
  s.levels_rule = fmt::format(
      "{} levels evenly spaced from {:.4f} ({}'s mean validation loss at step {}, the first evaluation at or after "
      "{:g}% of its {} steps) down to {}",
      s.levels.size(), s.levels.front(), ref->label(), high_step, o.milestone_start * 100, ref->max_steps(), lowest) +
                  how;
}

std::vector<MilestoneCell> milestones(const StudyConfig& c, const StudyConfig* base, const std::vector<double>& levels,
                                      double confidence) {
  std::vector<MilestoneCell> out;
  for (double level : levels) {
    MilestoneCell m;
    m.level = level;
    std::vector<double> steps, tokens;
    std::map<uint64_t, double> mine;  // seed -> steps
    for (const auto* r : c.runs) {
      auto [st, tk] = crossing(r->val, level);
      ++m.runs;
      if (std::isfinite(st)) {
        ++m.reached;
        steps.push_back(st);
        tokens.push_back(tk);
        mine[r->seed] = st;
      }
    }
    const bool all = m.reached == m.runs && m.runs > 0;
    m.steps = all ? mean_of(steps) : kNaN;
    m.tokens = all ? mean_of(tokens) : kNaN;
    m.steps_ci = all ? mean_interval(steps, confidence) : Interval{kNaN, kNaN};
    m.ratio = kNaN;
    m.ratio_ci = {kNaN, kNaN};
    if (base) {
      std::vector<double> logs;  // log(steps / uniform steps), per seed
      for (const auto* b : base->runs) {
        auto it = mine.find(b->seed);
        const double bs = crossing(b->val, level).first;
        if (it != mine.end() && bs > 0 && it->second > 0) logs.push_back(std::log(it->second / bs));
      }
      m.ratio_pairs = static_cast<int>(logs.size());
      if (!logs.empty()) m.ratio = std::exp(mean_of(logs));
      const Interval li = mean_interval(logs, confidence);
      if (std::isfinite(li.lo)) m.ratio_ci = {std::exp(li.lo), std::exp(li.hi)};
    }
    out.push_back(m);
  }
  return out;
}

const StudyEval* eval_of(const StudyRun& r, const std::string& task) {
  for (const auto& e : r.evals)
    if (e.task == task) return &e;
  return nullptr;
}

// McNemar on acc_norm: the items of each seed pair that only one side got right, summed over seed pairs.
void mcnemar(TaskScore& t, const StudyConfig& c, const StudyConfig& base) {
  for (const auto* r : c.runs)
    for (const auto* b : base.runs) {
      if (r->seed != b->seed) continue;
      const StudyEval* e = eval_of(*r, t.task);
      const StudyEval* u = eval_of(*b, t.task);
      // The same items in the same order, each with its per-item result.
      if (!e || !u || e->right_norm.empty() || e->item_line != u->item_line || e->right_norm.size() != u->right_norm.size())
        continue;
      ++t.test_pairs;
      for (size_t i = 0; i < e->right_norm.size(); ++i) {
        ++t.compared;
        if (e->right_norm[i] && !u->right_norm[i]) ++t.only_this;
        if (!e->right_norm[i] && u->right_norm[i]) ++t.only_baseline;
      }
    }
  if (t.test_pairs > 0) t.p = mcnemar_exact_p(t.only_this, t.only_baseline);
}

std::vector<TaskScore> task_scores(const StudyConfig& c, const StudyConfig* base, const std::vector<std::string>& tasks) {
  std::vector<TaskScore> out;
  for (const auto& task : tasks) {
    TaskScore t;
    t.task = task;
    std::vector<double> acc, acc_se, norm, norm_se;
    for (const auto* r : c.runs)
      if (const StudyEval* e = eval_of(*r, task)) {
        acc.push_back(e->acc);
        acc_se.push_back(e->acc_stderr);
        norm.push_back(e->acc_norm);
        norm_se.push_back(e->acc_norm_stderr);
        t.n = e->n;
      }
    t.seeds = static_cast<int>(acc.size());
    t.acc = mean_of(acc);
    t.acc_stderr = mean_of(finite(acc_se));
    t.acc_norm = mean_of(norm);
    t.acc_norm_stderr = mean_of(finite(norm_se));
    t.acc_norm_diff = kNaN;
    t.p = t.p_holm = kNaN;
    if (base) {
      auto pairs = by_seed(c, *base, [&](const StudyRun& r) {
        const StudyEval* e = eval_of(r, task);
        return e ? e->acc_norm : kNaN;
      });
      std::vector<double> d;
      for (const auto& [seed, v] : pairs) d.push_back(v.first - v.second);
      t.acc_norm_diff = mean_of(d);
      mcnemar(t, c, *base);
    }
    out.push_back(t);
  }
  return out;
}

// The model preset a configuration's runs trained, when the bench can build it
// (prism bench train takes a preset and a vocabulary); "" otherwise.
std::string bench_preset(const StudyRun& r) {
  auto it = r.experiment.find("model.preset");
  if (it == r.experiment.end()) return "";
  ModelConfig p;
  try {
    p = model_preset(it->second);
  } catch (const Error&) {
    return "";
  }
  auto value = [&](const char* key) {
    auto v = r.experiment.find(key);
    try {
      return v == r.experiment.end() ? kNaN : std::stod(v->second);
    } catch (const std::exception&) {
      return kNaN;
    }
  };
  const bool bias = r.experiment.count("model.bias") && r.experiment.at("model.bias") == (p.bias ? "true" : "false");
  const bool same = value("model.n_layer") == p.n_layer && value("model.d_model") == p.d_model &&
                    value("model.n_head") == p.n_head && value("model.block_size") == p.block_size &&
                    value("model.dropout") == p.dropout && bias;
  return same ? it->second : "";
}

// The dtype a run of this config trains in on this machine (train.dtype auto: as prism train resolves it here).
std::string bench_dtype(const StudyRun& r, int threads) {
  auto it = r.experiment.find("train.dtype");
  const std::string d = it == r.experiment.end() ? "auto" : it->second;
  if (d != "auto") return d;
  TrainConfig t;
  t.device = "cpu";
  t.dtype = "auto";
  t.threads = threads;
  return resolve_execution(t).bf16 ? "bf16" : "fp32";
}

Throughput measure_throughput(const StudyConfig& c, const StudyConfig* base, const ReportOptions& o) {
  Throughput t;
  t.uniform_tokens_per_s = t.tokens_per_s = t.ratio = kNaN;
  t.ratio_ci = {kNaN, kNaN};
  if (c.uniform || !base) return t;
  if (o.bench_steps <= 0) {
    t.note = "the report measures it when asked (prism report --bench-steps N; scripts/study-report.sh does)";
    return t;
  }
  const StudyRun& r = *c.runs.front();
  BenchRequest q;
  q.model = bench_preset(r);
  if (q.model.empty()) {
    t.note = "prism bench train builds model presets only, and this model is not one";
    return t;
  }
  if (r.vocab_size <= 0) {
    t.note = "the model's vocabulary is unknown here (its data is not prepared at data.dir)";
    return t;
  }
  q.vocab = r.vocab_size;
  q.heads = HeadSchedule(c.heads).compact();
  auto integer = [&](const char* key) {
    auto it = r.experiment.find(key);
    return it == r.experiment.end() ? int64_t(0) : static_cast<int64_t>(std::stoll(it->second));
  };
  q.batch = integer("train.batch_size");
  q.seq = integer("train.seq_len");
  if (q.seq == 0) q.seq = integer("model.block_size");
  q.dtype = bench_dtype(r, o.bench_threads);
  q.threads = o.bench_threads;
  q.steps = o.bench_steps;
  q.warmup = o.bench_warmup;
  const BenchResult b = run_bench_train(q);
  t.measured = true;
  t.uniform_tokens_per_s = b.uniform_tokens_per_s;
  t.tokens_per_s = b.tokens_per_s;
  t.ratio = b.ratio;
  t.ratio_ci = {b.ratio_lo, b.ratio_hi};
  t.dtype = q.dtype;
  t.machine = b.machine;
  t.command = b.command;
  return t;
}

void add_delta(ConfigReport& cr, double confidence) {
  const StudyConfig& c = *cr.config;
  for (size_t l = 1; l < c.heads.size(); ++l)
    if (c.heads[l] != c.heads[l - 1]) cr.transitions.push_back(static_cast<int>(l));
  if (!cr.baseline) return;
  std::vector<DistanceProfile> mine, theirs;
  for (const auto* r : c.runs)
    if (r->profile) mine.push_back(*r->profile);
  for (const auto* r : cr.baseline->runs)
    if (r->profile) theirs.push_back(*r->profile);
  if (mine.empty() || theirs.empty()) {
    cr.delta_note = "no held-out distance profiles yet: post-process the sweep (prism sweep DIR --post POST.yaml)";
    return;
  }
  try {
    cr.delta = distance_delta(mine, theirs, confidence);
    if (mine.size() < c.runs.size() || theirs.size() < cr.baseline->runs.size())
      cr.delta_note = fmt::format("Profiles from {} of {} runs and {} of {} baseline runs (the others have no profile yet)",
                                  mine.size(), c.runs.size(), theirs.size(), cr.baseline->runs.size());
  } catch (const Error& e) {
    cr.delta_note = e.what_part();
  }
}

// Holm's adjustment over one family of p-values scattered through the report:
// `get` yields pointers to (p, adjusted p) pairs.
void holm_family(const std::vector<std::pair<const double*, double*>>& family) {
  std::vector<double> p;
  for (const auto& f : family) p.push_back(*f.first);
  const auto adjusted = holm_adjust(p);
  for (size_t i = 0; i < family.size(); ++i) *family[i].second = adjusted[i];
}

// After Holm: each loss difference's detectable effects (at alpha and at Holm's first step,
// alpha / m over the report's m loss tests), its TOST p adjusted over the report's TOSTs, and its verdict.
void power_and_verdicts(StudyReport& rep) {
  const double alpha = 1 - rep.options.confidence;
  std::vector<PairedDiff*> diffs;
  for (auto& s : rep.scales)
    for (auto& cr : s.configs)
      if (cr.diff) diffs.push_back(&*cr.diff);
  int tests = 0;
  std::vector<double> tost;
  for (const PairedDiff* d : diffs) {
    tests += std::isfinite(d->p) ? 1 : 0;
    tost.push_back(d->tost_p);
  }
  const std::vector<double> tost_holm = holm_adjust(tost);
  for (size_t i = 0; i < diffs.size(); ++i) {
    PairedDiff& d = *diffs[i];
    d.tost_p_holm = tost_holm[i];
    d.mde = min_detectable_effect(d.sd, d.pairs, alpha, rep.options.power);
    d.mde_holm = min_detectable_effect(d.sd, d.pairs, alpha / std::max(tests, 1), rep.options.power);
    d.verdict = comparison_verdict(d.mean, d.p_holm, d.tost_p_holm, alpha);
  }
}

void adjust_report(StudyReport& rep) {
  std::vector<std::pair<const double*, double*>> loss, zero, delta, delta_norm;
  for (auto& s : rep.scales)
    for (auto& cr : s.configs) {
      if (cr.diff) loss.push_back({&cr.diff->p, &cr.diff->p_holm});
      for (auto& t : cr.tasks) zero.push_back({&t.p, &t.p_holm});
      if (!cr.delta) continue;
      cr.delta_p_holm.assign(cr.delta->rows.size(), kNaN);
      cr.delta_p_holm_normalized.assign(cr.delta->rows.size(), kNaN);
      for (size_t l = 0; l < cr.delta->rows.size(); ++l) {
        delta.push_back({&cr.delta->rows[l].seed_p, &cr.delta_p_holm[l]});
        delta_norm.push_back({&cr.delta->rows[l].seed_p_normalized, &cr.delta_p_holm_normalized[l]});
      }
    }
  for (const auto* family : {&loss, &zero, &delta, &delta_norm}) holm_family(*family);
  power_and_verdicts(rep);
}

// The sequential design's looks so far at one scale (options.sequential.first > 0).
SequentialState sequential_state(const ScaleReport& s, SequentialDesign d) {
  SequentialState st;
  std::vector<std::vector<double>> diffs;
  for (const auto& cr : s.configs) {
    if (!cr.diff || cr.diff->method != "paired") continue;
    auto seeds = cr.diff->seeds;
    std::sort(seeds.begin(), seeds.end());
    std::vector<double> x;
    for (const auto& [seed, v] : seeds) x.push_back(v.first - v.second);
    st.comparisons.push_back(&cr);
    diffs.push_back(std::move(x));
    d.margin = cr.diff->margin;
  }
  if (diffs.empty()) {
    st.next = "no comparison pairs 2 seeds with uniform yet: the first look needs " + std::to_string(d.first);
    return st;
  }
  size_t have = diffs[0].size();
  for (const auto& x : diffs) have = std::min(have, x.size());
  int last = -1;
  for (int k = 0; k < d.looks() && static_cast<size_t>(d.pairs_at(k)) <= have; ++k) last = k;
  st.levels = sequential_levels(d, static_cast<int>(diffs.size()));
  if (last < 0) {
    st.next = fmt::format("first look at {} seed pairs: {} so far. Train seeds up to {} of uniform and every schedule",
                          d.first, have, d.first);
    return st;
  }
  st.pairs = d.pairs_at(last);
  for (int k = 0; k <= last; ++k) st.look_pairs.push_back(d.pairs_at(k));
  st.verdicts = sequential_history(d, diffs, st.pairs);
  std::vector<std::string> open;
  for (size_t c = 0; c < diffs.size(); ++c)
    if (st.verdicts.back()[c].empty()) open.push_back(st.comparisons[c]->config->label());
  if (open.empty())
    st.next = fmt::format("stop: every comparison has its verdict after {} seed pairs", st.pairs);
  else if (st.pairs == d.cap)
    st.next = fmt::format("cap reached ({} pairs): {} stay unresolved", d.cap, fmt::join(open, ", "));
  else
    st.next = fmt::format("next look at {} seed pairs ({} unresolved): grow the sweep to {} seeds of uniform and of the "
                          "unresolved schedules (rerun it with more sweep.grid.train.seed into the same --out, or a "
                          "second sweep given to the report too), then report again",
                          d.pairs_at(last + 1), fmt::join(open, ", "), d.pairs_at(last + 1));
  return st;
}

}  // namespace

std::string report_figure(const std::string& kind, const StudyScale& s, const StudyConfig* c) {
  return c ? fmt::format("{}-{}-{}.png", kind, report_slug(s.label), report_slug(c->label()))
           : fmt::format("{}-{}.png", kind, report_slug(s.label));
}

std::string report_slug(const std::string& text) {
  std::string out;
  for (char ch : text) {
    const bool keep = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_';
    if (keep) out += ch;
    else if (ch != ' ' && !out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "x" : out;
}

std::string comparison_verdict(double mean, double p_holm, double tost_p_holm, double alpha) {
  if (std::isfinite(p_holm) && p_holm < alpha) return mean < 0 ? "better" : "worse";
  if (std::isfinite(tost_p_holm) && tost_p_holm < alpha) return "equivalent";
  return "unresolved";
}

std::string confidence_percent(double confidence) { return fmt::format("{:.10g}%", confidence * 100); }

StudyReport build_study_report(const ReportOptions& o) {
  t_quantile(o.confidence, 1);  // rejects a bad level before any work
  return build_study_report(load_study(o.sweeps), o);
}

StudyReport build_study_report(Study study, const ReportOptions& o) {
  t_quantile(o.confidence, 1);
  if (o.milestones < 1) throw Error("--milestones must be at least 1", "--milestones", "pass --milestones 5");
  if (!(o.milestone_start > 0 && o.milestone_start < 1))
    throw Error("the first milestone's share of the steps must lie in (0, 1)", "--milestone-start", "use e.g. 0.1");
  if (o.bench_steps < 0 || o.bench_warmup < 0 || o.bench_threads < 1)
    throw Error("--bench-steps and --bench-warmup must be at least 0, --bench-threads at least 1", "prism report",
                "e.g. --bench-steps 20 --bench-warmup 3 --bench-threads 1");
  StudyReport rep;
  rep.options = o;
  rep.study = std::move(study);
  for (const auto& sc : rep.study.scales) {
    ScaleReport s;
    s.scale = &sc;
    for (const auto& c : sc.configs)
      for (const auto* r : c.runs)
        for (const auto& e : r->evals)
          if (std::find(s.tasks.begin(), s.tasks.end(), e.task) == s.tasks.end()) s.tasks.push_back(e.task);
    milestone_levels(s, o);
    for (const auto& c : sc.configs) {
      ConfigReport cr;
      cr.config = &c;
      cr.baseline = c.uniform ? nullptr : sc.baseline_of(c);
      cr.loss = loss_summary(c, o.confidence);
      if (cr.baseline)
        cr.diff = loss_difference(c, *cr.baseline, o.confidence,
                                  std::isfinite(o.margin) ? o.margin : paper_effect(sc.label).nats);
      cr.milestones = milestones(c, cr.baseline, s.levels, o.confidence);
      cr.tasks = task_scores(c, cr.baseline, s.tasks);
      cr.throughput = measure_throughput(c, cr.baseline, o);
      add_delta(cr, o.confidence);
      cr.by_position = position_cells(c, cr.baseline, o.confidence);
      s.configs.push_back(std::move(cr));
    }
    rep.scales.push_back(std::move(s));
  }
  adjust_report(rep);
  if (o.sequential.first > 0) {
    o.sequential.check();
    for (auto& s : rep.scales) s.sequential = sequential_state(s, o.sequential);
  }
  return rep;
}

namespace {

// The report's tables: their columns named on construction, then rows added a scale at a time.
struct ReportTables {
  Table loss, paired, miles, zero, thr, delta, curves, figures, by_position, sequential;
  ReportTables() {
    sequential.columns = {"scale", "schedule", "settings", "look", "pairs", "level_difference", "level_equivalence",
                          "margin", "verdict"};
    by_position.columns = {"scale", "schedule", "settings", "bucket", "position_lo", "position_hi", "seeds", "loss",
                           "loss_ci_lo", "loss_ci_hi", "diff_vs_uniform", "diff_ci_lo", "diff_ci_hi", "diff_p",
                           "diff_pairs", "confidence"};
    loss.columns = {"scale", "schedule", "heads", "settings", "parameters", "seeds", "val_loss_mean", "val_loss_ci_lo",
                    "val_loss_ci_hi", "val_loss_sd_seeds", "val_loss_se_run", "unigram_val_loss", "diff_vs_uniform",
                    "diff_ci_lo", "diff_ci_hi", "diff_p", "diff_p_holm", "diff_method", "diff_pairs", "diff_runs",
                    "diff_baseline_runs", "confidence", "diff_sd", "power", "mde", "mde_holm", "margin", "tost_p",
                    "tost_p_holm", "verdict"};
    paired.columns = {"scale", "schedule", "settings", "seed", "val_loss", "uniform_val_loss", "diff", "unigram_val_loss"};
    miles.columns = {"scale", "schedule", "settings", "milestone", "level", "reached", "runs", "steps", "steps_ci_lo",
                     "steps_ci_hi", "tokens", "steps_ratio_to_uniform", "ratio_ci_lo", "ratio_ci_hi", "ratio_pairs",
                     "unigram_val_loss"};
    zero.columns = {"scale", "schedule", "settings", "task", "seeds", "n", "acc", "acc_stderr", "acc_norm",
                    "acc_norm_stderr", "acc_norm_diff_vs_uniform", "seed_pairs_tested", "item_comparisons",
                    "only_this_right", "only_uniform_right", "mcnemar_p", "mcnemar_p_holm"};
    thr.columns = {"scale", "schedule", "settings", "measured", "dtype", "uniform_tokens_per_s", "tokens_per_s",
                   "ratio_to_uniform", "machine", "command", "note", "ratio_ci_lo", "ratio_ci_hi"};
    delta.columns = {"scale", "schedule", "settings", "layer", "heads", "baseline_heads", "head_dim", "transition",
                     "prism", "uniform", "delta", "batch_ci_lo", "batch_ci_hi", "seed_method", "seed_pairs",
                     "seed_ci_lo", "seed_ci_hi", "seed_p", "seed_p_holm", "prism_normalized", "uniform_normalized",
                     "delta_normalized", "batch_ci_normalized_lo", "batch_ci_normalized_hi", "seed_ci_normalized_lo",
                     "seed_ci_normalized_hi", "seed_p_normalized", "seed_p_holm_normalized", "prism_runs",
                     "baseline_runs"};
    curves.columns = {"scale", "schedule", "settings", "run", "seed", "step", "tokens", "loss", "loss_se",
                      "unigram_val_loss"};
    figures.columns = {"file", "kind", "scale", "schedule", "title"};
  }

  // A configuration's final loss (and its difference from uniform), and its seeds paired with uniform's.
  void add_loss(const StudyScale& sc, const ConfigReport& cr, const ReportOptions& o) {
    const StudyConfig& c = *cr.config;
    const std::string heads = heads_cell(c.heads);
    const double u = c.unigram();
    const int64_t params = c.parameters();
    const bool d = cr.diff.has_value();
    loss.add({sc.label, c.schedule, heads, c.settings, params > 0 ? Cell(params) : Cell(), int64_t(cr.loss.seeds), cr.loss.mean,
              cr.loss.ci.lo, cr.loss.ci.hi, cr.loss.sd, cr.loss.val_se, u, d ? cr.diff->mean : kNaN,
              d ? cr.diff->ci.lo : kNaN, d ? cr.diff->ci.hi : kNaN, d ? cr.diff->p : kNaN, d ? cr.diff->p_holm : kNaN,
              d ? cr.diff->method : std::string(), int64_t(d ? cr.diff->pairs : 0),
              int64_t(d ? cr.diff->runs : 0), int64_t(d ? cr.diff->baseline_runs : 0), o.confidence,
              d ? cr.diff->sd : kNaN, o.power, d ? cr.diff->mde : kNaN, d ? cr.diff->mde_holm : kNaN,
              d ? cr.diff->margin : kNaN, d ? cr.diff->tost_p : kNaN, d ? cr.diff->tost_p_holm : kNaN,
              d ? cr.diff->verdict : std::string()});
    if (d)
      for (const auto& [seed, v] : cr.diff->seeds)
        paired.add({sc.label, c.schedule, c.settings, int64_t(seed), v.first, v.second, v.first - v.second, u});
  }

  // Its milestones, zero-shot scores and (a schedule only) throughput against uniform.
  void add_milestones_tasks_throughput(const StudyScale& sc, const ConfigReport& cr) {
    const StudyConfig& c = *cr.config;
    const double u = c.unigram();
    for (size_t k = 0; k < cr.milestones.size(); ++k) {
      const auto& m = cr.milestones[k];
      miles.add({sc.label, c.schedule, c.settings, int64_t(k + 1), m.level, int64_t(m.reached), int64_t(m.runs),
                 m.steps, m.steps_ci.lo, m.steps_ci.hi, m.tokens, m.ratio, m.ratio_ci.lo, m.ratio_ci.hi,
                 int64_t(m.ratio_pairs), u});
    }
    for (const auto& t : cr.tasks)
      zero.add({sc.label, c.schedule, c.settings, t.task, int64_t(t.seeds), t.n, t.acc, t.acc_stderr, t.acc_norm,
                t.acc_norm_stderr, t.acc_norm_diff, int64_t(t.test_pairs), t.compared, t.only_this, t.only_baseline,
                t.p, t.p_holm});
    const auto& th = cr.throughput;
    if (!c.uniform)
      thr.add({sc.label, c.schedule, c.settings, int64_t(th.measured), th.dtype, th.uniform_tokens_per_s,
               th.tokens_per_s, th.ratio, th.machine, th.command, th.note, th.ratio_ci.lo, th.ratio_ci.hi});
  }

  // Its Delta D_l per layer and the figure of it, when it has one.
  void add_delta_layers(const StudyScale& sc, const ConfigReport& cr) {
    if (!cr.delta) return;
    const StudyConfig& c = *cr.config;
    for (size_t l = 0; l < cr.delta->rows.size(); ++l) {
      const auto& r = cr.delta->rows[l];
      const bool transition = std::find(cr.transitions.begin(), cr.transitions.end(), r.layer) != cr.transitions.end();
      delta.add({sc.label, c.schedule, c.settings, int64_t(r.layer), int64_t(r.heads), int64_t(r.baseline_heads),
                 int64_t(sc.d_model / r.heads), int64_t(transition), r.prism, r.baseline, r.delta, r.batch_ci.lo,
                 r.batch_ci.hi, cr.delta->seed_method, int64_t(cr.delta->seed_pairs), r.seed_ci.lo, r.seed_ci.hi,
                 r.seed_p, cr.delta_p_holm[l], r.prism_normalized, r.baseline_normalized, r.delta_normalized,
                 r.batch_ci_normalized.lo, r.batch_ci_normalized.hi, r.seed_ci_normalized.lo,
                 r.seed_ci_normalized.hi, r.seed_p_normalized, cr.delta_p_holm_normalized[l],
                 int64_t(cr.delta->prism_runs.size()), int64_t(cr.delta->baseline_runs.size())});
    }
    figures.add({report_figure("delta", sc, &c), std::string("delta"), sc.label, c.label(),
                 fmt::format("{}: Delta D_l, {} - uniform (transitions dashed)", sc.label, c.label())});
  }

  // Its loss by position and every run's validation curve.
  void add_positions_curves(const StudyScale& sc, const ConfigReport& cr, double conf) {
    const StudyConfig& c = *cr.config;
    for (size_t b = 0; b < cr.by_position.size(); ++b) {
      const auto& p = cr.by_position[b];
      by_position.add({sc.label, c.schedule, c.settings, int64_t(b), p.lo, p.hi - 1, int64_t(p.seeds), p.loss,
                       p.loss_ci.lo, p.loss_ci.hi, p.diff, p.diff_ci.lo, p.diff_ci.hi, p.p, int64_t(p.pairs), conf});
    }
    for (const auto* r : c.runs)
      for (const auto& v : r->val)
        curves.add({sc.label, c.schedule, c.settings, r->name, int64_t(r->seed), v.step, v.tokens, v.loss, v.loss_se,
                    r->unigram});
  }

  // A scale: its loss figure, then every configuration's rows.
  void add_scale(const ScaleReport& s, const ReportOptions& o) {
    const StudyScale& sc = *s.scale;
    const double unigram = sc.unigrams.size() == 1 ? sc.unigrams.front() : kNaN;
    figures.add({report_figure("loss", sc, nullptr), std::string("loss"), sc.label, std::string(""),
                 fmt::format("{}: validation loss (unigram baseline {})", sc.label,
                             std::isfinite(unigram) ? fmt::format("{:.4f}", unigram) : "unknown, or several")});
    for (const auto& cr : s.configs) {
      add_loss(sc, cr, o);
      add_milestones_tasks_throughput(sc, cr);
      add_delta_layers(sc, cr);
      add_positions_curves(sc, cr, o.confidence);
    }
  }

  // A scale's sequential verdicts, look by look.
  void add_sequential(const ScaleReport& s) {
    const SequentialState& st = *s.sequential;
    for (size_t k = 0; k < st.verdicts.size(); ++k)
      for (size_t c = 0; c < st.comparisons.size(); ++c) {
        const StudyConfig& cfg = *st.comparisons[c]->config;
        const std::string& v = st.verdicts[k][c];
        sequential.add({s.scale->label, cfg.schedule, cfg.settings, int64_t(k + 1), int64_t(st.look_pairs[k]),
                        st.levels.difference, st.levels.equivalence, st.comparisons[c]->diff->margin,
                        v.empty() ? std::string("unresolved") : v});
      }
  }
};

}  // namespace

std::vector<std::pair<std::string, Table>> report_tables(const StudyReport& rep) {
  ReportTables tables;
  for (const auto& s : rep.scales) tables.add_scale(s, rep.options);
  bool any_sequential = false;
  for (const auto& s : rep.scales) {
    if (!s.sequential) continue;
    any_sequential = true;
    tables.add_sequential(s);
  }
  std::vector<std::pair<std::string, Table>> out{
      {"final_loss.csv", tables.loss},   {"paired.csv", tables.paired}, {"milestones.csv", tables.miles},
      {"zero_shot.csv", tables.zero},    {"throughput.csv", tables.thr}, {"delta.csv", tables.delta},
      {"curves.csv", tables.curves},     {"figures.csv", tables.figures}, {"loss_by_position.csv", tables.by_position}};
  if (any_sequential) out.emplace_back("sequential.csv", tables.sequential);
  return out;
}

std::vector<std::string> write_study_report(const StudyReport& rep, const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(fmt::format("cannot create the report directory: {}", ec.message()), out_dir, "choose another --out");
  std::vector<std::string> files;
  ResultGroup h5;
  h5.text["content"] = "the tables of report.md, one group per CSV beside this file (store/table_group.h)";
  for (const auto& [name, table] : report_tables(rep)) {
    const std::string path = (fs::path(out_dir) / name).string();
    write_file_atomic(path, to_csv(table));
    files.push_back(path);
    put_table(h5, fs::path(name).stem().string(), table);
  }
  const std::string h5_path = (fs::path(out_dir) / "report.h5").string();
  write_result_file(h5_path, h5, "the report's tables");
  files.push_back(h5_path);
  const std::string md = (fs::path(out_dir) / "report.md").string();
  write_file_atomic(md, report_markdown(rep));
  files.insert(files.begin(), md);
  return files;
}

}  // namespace prism
