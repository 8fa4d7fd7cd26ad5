#include "prism/sweep/index.h"

#include <H5Cpp.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "prism/error.h"
#include "prism/store/safetensors.h"
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

// --- HDF5 columns ------------------------------------------------------------

void write_strings(H5::Group& g, const std::string& name, const std::vector<std::string>& values) {
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  type.setCset(H5T_CSET_UTF8);
  hsize_t n = values.size();
  H5::DataSet ds = g.createDataSet(name, type, H5::DataSpace(1, &n));
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  if (n > 0) ds.write(ptrs.data(), type);
}

template <class T>
void write_numbers(H5::Group& g, const std::string& name, const std::vector<T>& values, const H5::PredType& file_type,
                   const H5::PredType& mem_type) {
  hsize_t n = values.size();
  H5::DataSet ds = g.createDataSet(name, file_type, H5::DataSpace(1, &n));
  if (n > 0) ds.write(values.data(), mem_type);
}

void write_string_attr(H5::H5Object& o, const char* name, const std::string& value) {
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  type.setCset(H5T_CSET_UTF8);
  o.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, value);
}

// sweep.h5 built in memory (HDF5's core driver) and returned as the file's bytes:
// write_file_atomic then puts it on disk, so a full disk fails that write cleanly
// instead of HDF5's close, which would leave a broken file (and crash at exit).
std::string sweep_h5_image(const SweepPlan& plan, const std::string& path, const std::vector<TrialOutcome>& outcomes,
                           const std::vector<RankRow>& rows, const std::vector<PromotionDecision>& decisions,
                           const std::string& sweep_yaml) {
  H5::FileAccPropList in_memory;
  in_memory.setCore(1 << 16, false);
  H5::H5File f(path, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, in_memory);
  write_string_attr(f, "name", plan.settings.name);
  write_string_attr(f, "source", plan.source);
  write_string_attr(f, "sweep", sweep_yaml);
  write_string_attr(f, "prism_version", PRISM_VERSION);

  H5::Group trials = f.createGroup("trials");
  std::vector<std::string> name, group, schedule, status, message, run;
  std::vector<uint64_t> seed;
  std::vector<int32_t> baseline, rung, n_layer;
  std::vector<int64_t> steps, tokens, tokens_all;
  std::vector<double> best, final_val, wall, wall_all;
  size_t max_l = 0;
  for (const auto& o : outcomes) max_l = std::max(max_l, o.trial->schedule.heads().size());
  std::vector<int32_t> heads(outcomes.size() * max_l, 0);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    const Trial& t = *o.trial;
    name.push_back(t.name);
    group.push_back(t.group);
    schedule.push_back(t.schedule.compact());
    status.push_back(o.status);
    message.push_back(o.message);
    run.push_back(o.run_dir);
    seed.push_back(t.seed);
    baseline.push_back(t.baseline);
    rung.push_back(o.rung);
    n_layer.push_back(t.schedule.n_layer());
    steps.push_back(o.steps);
    tokens.push_back(o.tokens);
    tokens_all.push_back(o.tokens_all);
    best.push_back(o.best_val);
    final_val.push_back(o.final_val);
    wall.push_back(o.wall_s);
    wall_all.push_back(o.wall_all);
    for (size_t l = 0; l < t.schedule.heads().size(); ++l) heads[i * max_l + l] = t.schedule.heads()[l];
  }
  write_strings(trials, "name", name);
  write_strings(trials, "group", group);
  write_strings(trials, "schedule", schedule);
  write_strings(trials, "status", status);
  write_strings(trials, "message", message);
  write_strings(trials, "run_dir", run);
  if (!param_columns(plan).empty()) trials.createGroup("param");
  for (const auto& key : param_columns(plan)) {
    std::vector<std::string> v;
    for (const auto& o : outcomes) v.push_back(param_value(*o.trial, key));
    write_strings(trials, "param/" + key, v);
  }
  write_numbers(trials, "seed", seed, H5::PredType::STD_U64LE, H5::PredType::NATIVE_UINT64);
  write_numbers(trials, "baseline", baseline, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
  write_numbers(trials, "rung", rung, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
  write_numbers(trials, "n_layer", n_layer, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
  write_numbers(trials, "steps", steps, H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64);
  write_numbers(trials, "tokens", tokens, H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64);
  write_numbers(trials, "tokens_all_rungs", tokens_all, H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64);
  write_numbers(trials, "best_val_loss", best, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
  write_numbers(trials, "final_val_loss", final_val, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
  write_numbers(trials, "wall_s", wall, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
  write_numbers(trials, "wall_s_all_rungs", wall_all, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
  {
    hsize_t dims[2] = {outcomes.size(), std::max<size_t>(max_l, 1)};
    if (max_l == 0) heads.assign(outcomes.size(), 0);
    H5::DataSet ds = trials.createDataSet("heads", H5::PredType::STD_I32LE, H5::DataSpace(2, dims));
    if (!outcomes.empty()) ds.write(heads.data(), H5::PredType::NATIVE_INT32);
  }

  H5::Group ranking = f.createGroup("ranking");
  std::vector<std::string> r_group, r_schedule, r_params;
  std::vector<int32_t> r_done, r_total, r_baseline;
  std::vector<double> r_mean, r_std, r_diff;
  for (const auto& r : rows) {
    r_group.push_back(r.group);
    r_schedule.push_back(r.schedule);
    r_params.push_back(fmt::format("{}", fmt::join(r.params, " ")));
    r_done.push_back(r.seeds_done);
    r_total.push_back(r.seeds_total);
    r_baseline.push_back(r.baseline);
    r_mean.push_back(r.mean);
    r_std.push_back(r.std);
    r_diff.push_back(r.diff_to_baseline);
  }
  write_strings(ranking, "group", r_group);
  write_strings(ranking, "schedule", r_schedule);
  write_strings(ranking, "params", r_params);
  write_numbers(ranking, "seeds_done", r_done, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
  write_numbers(ranking, "seeds_total", r_total, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
  write_numbers(ranking, "baseline", r_baseline, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
  write_numbers(ranking, "val_loss_mean", r_mean, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
  write_numbers(ranking, "val_loss_std", r_std, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
  write_numbers(ranking, "diff_to_baseline", r_diff, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);

  if (plan.settings.halving.enabled) {
    H5::Group h = f.createGroup("halving");
    std::vector<int32_t> d_rung, d_rank, d_promoted;
    std::vector<int64_t> d_steps;
    std::vector<std::string> d_group, d_reason;
    std::vector<double> d_loss;
    for (const auto& d : decisions) {
      d_rung.push_back(d.rung);
      d_steps.push_back(d.steps);
      d_group.push_back(d.group);
      d_loss.push_back(d.val_loss);
      d_rank.push_back(d.rank);
      d_promoted.push_back(d.promoted);
      d_reason.push_back(d.reason);
    }
    write_numbers(h, "rung", d_rung, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
    write_numbers(h, "steps", d_steps, H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64);
    write_strings(h, "group", d_group);
    write_numbers(h, "val_loss", d_loss, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
    write_numbers(h, "rank", d_rank, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
    write_numbers(h, "promoted", d_promoted, H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT32);
    write_strings(h, "reason", d_reason);
    const auto budgets = rung_budgets(plan.trials.at(0).max_steps, plan.settings.halving);
    write_numbers(h, "budgets", budgets, H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64);
  }
  f.flush(H5F_SCOPE_GLOBAL);
  std::string image(static_cast<size_t>(std::max<ssize_t>(0, H5Fget_file_image(f.getId(), nullptr, 0))), '\0');
  if (image.empty() || H5Fget_file_image(f.getId(), image.data(), image.size()) != static_cast<ssize_t>(image.size()))
    throw H5::FileIException("H5Fget_file_image", "cannot take the in-memory image of sweep.h5");
  return image;
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
    o.best_val = o.final_val = kNaN;
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
      o.best_val = o.final_val = kNaN;
      o.wall_s = ins.record.wall_s;
      if (!ins.h5_status.empty() && ins.h5_status != "unreadable") {
        const RunResult r = read_run_result(h5.string());
        o.steps = r.steps;
        o.tokens = r.tokens;
        o.best_val = r.best_val_loss();
        o.final_val = o.status == "completed" ? r.final_val_loss() : kNaN;
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

void write_index(const SweepPlan& plan, const std::string& sweep_dir, const std::vector<TrialOutcome>& outcomes,
                 const std::vector<RankRow>& rows, const std::vector<PromotionDecision>& decisions) {
  const fs::path dir(sweep_dir);
  const auto columns = param_columns(plan);
  std::ostringstream csv;
  csv << "name,group,schedule,heads,seed";
  for (const auto& c : columns) csv << "," << csv_field(c);
  csv << ",status,rung,steps,tokens,best_val_loss,final_val_loss,wall_s,tokens_all_rungs,wall_s_all_rungs,run_dir,"
         "message\n";
  for (const auto& o : outcomes) {
    const Trial& t = *o.trial;
    csv << csv_field(t.name) << "," << csv_field(t.group) << "," << csv_field(schedule_label(t)) << ","
        << csv_field(t.schedule.list()) << "," << t.seed;
    for (const auto& c : columns) csv << "," << csv_field(param_value(t, c));
    csv << "," << o.status << "," << o.rung << "," << o.steps << "," << o.tokens << "," << number(o.best_val) << ","
        << number(o.final_val) << "," << number(o.wall_s, 2) << "," << o.tokens_all << ","
        << number(o.wall_all, 2) << "," << csv_field(o.run_dir) << "," << csv_field(o.message) << "\n";
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
  const std::string h5 = (dir / "sweep.h5").string();
  std::string image;
  try {
    std::ifstream in((dir / "sweep.yaml").string());
    std::stringstream yaml;
    yaml << in.rdbuf();
    image = sweep_h5_image(plan, h5, outcomes, rows, decisions, yaml.str());
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot build the sweep index: {}", e.getDetailMsg()), h5,
                "rerun the sweep (or prism sweep DIR --collect) to rebuild the index");
  }
  write_file_atomic(h5, image);  // temp file, fsync, rename: the previous sweep.h5 survives any failure
}

}  // namespace prism
