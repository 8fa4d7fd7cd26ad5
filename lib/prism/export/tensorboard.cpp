#include "prism/export/tensorboard.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "prism/analysis/run_set.h"
#include "prism/error.h"
#include "prism/schedule/head_schedule.h"
#include "prism/sweep/sweep_dir.h"
#include "prism/launch/signals.h"

namespace prism {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- what one run sends ------------------------------------------------------

std::string scalar(const std::string& run, const std::string& tag, int64_t step, double value, double wall) {
  return json{{"op", "scalar"}, {"run", run}, {"tag", tag}, {"step", step}, {"value", value}, {"wall_time", wall}}.dump();
}

std::string text(const std::string& run, const std::string& tag, const std::string& markdown, double wall) {
  return json{{"op", "text"}, {"run", run}, {"tag", tag}, {"step", 0}, {"text", markdown}, {"wall_time", wall}}.dump();
}

std::string schedule_name(const HeadSchedule& s) { return s.is_uniform() ? "uniform" : s.compact(); }

// The wall time of `step`: that of the last training row at or before it.
double wall_at(const TensorBoardCursor& c, int64_t step) {
  double t = 0;
  for (const auto& st : c.step_time)
    if (st.first <= step) t = st.second;
  return c.wall0 + t;
}

// The schedule as TensorBoard's text plugin shows it (markdown).
std::string schedule_markdown(const RunAttributes& a) {
  const HeadSchedule s(a.heads);
  std::string widths;
  try {
    const int d_model = YAML::Load(a.config)["model"]["d_model"].as<int>();
    std::vector<int> w;
    for (int h : a.heads) w.push_back(d_model / h);
    widths = fmt::format("\n\nhead width per layer: {} (d_model {})", fmt::join(w, ", "), d_model);
  } catch (const std::exception&) {
    // a config without model.d_model: the counts alone
  }
  return fmt::format("**{}**: heads per layer [{}], seed {}{}", schedule_name(s), fmt::join(a.heads, ", "), a.seed, widths);
}

std::string config_markdown(const std::string& yaml) {
  std::string indented;  // a markdown code block: every line indented by 4 spaces
  std::istringstream in(yaml);
  for (std::string line; std::getline(in, line);) indented += "    " + line + "\n";
  return "resolved config (config.yaml):\n\n" + indented;
}

std::string hparams_line(const std::string& run, const RunAttributes& a,
                         const std::map<std::string, std::string>& columns, double start) {
  json hp = {{"schedule", schedule_name(HeadSchedule(a.heads))},
             {"heads", fmt::format("{}", fmt::join(a.heads, ","))},
             {"seed", a.seed}};
  for (const auto& [k, v] : columns) hp[k] = v;
  return json{{"op", "hparams"}, {"run", run}, {"hparams", hp}, {"trial_id", run}, {"start_time", start}}.dump();
}

// The first call: the clock, the texts and the HParams row.
void start_run(const RunReader& run, const std::string& name, const std::map<std::string, std::string>& columns,
               const std::vector<TrainRow>& train, TensorBoardCursor& c, std::vector<std::string>& out) {
  // run.h5 keeps elapsed seconds, not dates: the file's last change is the last row's time.
  const double mtime = std::chrono::duration<double>(fs::last_write_time(run.path()).time_since_epoch()).count() -
                       std::chrono::duration<double>(fs::file_time_type::clock::now().time_since_epoch()).count() +
                       std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  c.wall0 = mtime - (train.empty() ? 0.0 : train.back().time_s);
  const RunAttributes& a = run.attributes();
  out.push_back(text(name, "schedule", schedule_markdown(a), c.wall0));
  out.push_back(text(name, "config", config_markdown(a.config), c.wall0));
  out.push_back(hparams_line(name, a, columns, c.wall0));
  c.started = true;
}

void send_train(const std::string& name, const std::vector<TrainRow>& rows, TensorBoardCursor& c,
                std::vector<std::string>& out) {
  for (; c.train < rows.size(); ++c.train) {
    const TrainRow& r = rows[c.train];
    const double wall = c.wall0 + r.time_s;
    out.push_back(scalar(name, "train/loss", r.step, r.loss, wall));
    out.push_back(scalar(name, "train/lr", r.step, r.lr, wall));
    out.push_back(scalar(name, "train/grad_norm", r.step, r.grad_norm, wall));
    if (c.train > 0) {  // tokens/s since the row before (a resumed run's clock continues)
      const TrainRow& p = rows[c.train - 1];
      if (r.time_s > p.time_s)
        out.push_back(scalar(name, "train/tokens_per_s", r.step,
                             static_cast<double>(r.tokens - p.tokens) / (r.time_s - p.time_s), wall));
    }
    c.step_time.emplace_back(r.step, r.time_s);
  }
}

void send_val(const std::string& name, const std::vector<ValRow>& rows, TensorBoardCursor& c,
              std::vector<std::string>& out) {
  for (; c.val < rows.size(); ++c.val) {
    const ValRow& r = rows[c.val];
    out.push_back(scalar(name, "val/loss", r.step, r.loss, wall_at(c, r.step)));
    if (std::isfinite(r.loss_se)) out.push_back(scalar(name, "val/loss_se", r.step, r.loss_se, wall_at(c, r.step)));
  }
}

void send_distance(const std::string& name, const AttentionSeries& a, TensorBoardCursor& c,
                   std::vector<std::string>& out) {
  for (; c.attention < a.step.size(); ++c.attention) {
    const auto& layers = a.per_head[c.attention];
    for (size_t l = 0; l < layers.size(); ++l) {
      double sum = 0;
      for (double d : layers[l]) sum += d;
      out.push_back(scalar(name, fmt::format("distance/layer_{:02d}", l), a.step[c.attention],
                           sum / static_cast<double>(std::max<size_t>(1, layers[l].size())),
                           wall_at(c, a.step[c.attention])));
    }
  }
}

// ---- the bridge process ------------------------------------------------------

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// scripts/tensorboard_bridge.py, fed on its stdin; its output goes to a file read at the end.
class Bridge {
 public:
  Bridge(const TensorBoardOptions& o, const std::string& logdir)
      : output_((fs::temp_directory_path() / fmt::format("prism-tensorboard-{}.log", ::getpid())).string()) {
    std::signal(SIGPIPE, SIG_IGN);  // a bridge that died is an error we report, not a signal that kills prism
    cmd_ = fmt::format("'{}' '{}' '{}' > '{}' 2>&1", o.python, o.bridge, logdir, output_);
    pipe_ = ::popen(cmd_.c_str(), "w");
    if (!pipe_) throw Error("cannot start the TensorBoard writer", cmd_, "check --python (a Python with tensorboard)");
  }
  ~Bridge() {
    if (pipe_) ::pclose(pipe_);
    std::error_code ec;
    fs::remove(output_, ec);
  }
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  void send(const std::vector<std::string>& lines) {
    for (const auto& l : lines)
      if (std::fputs(l.c_str(), pipe_) < 0 || std::fputc('\n', pipe_) < 0) fail();
  }
  void flush() {
    send({json{{"op", "flush"}}.dump()});
    if (std::fflush(pipe_) != 0) fail();
  }
  // Closes its input, waits for it, and returns its summary line (JSON).
  json finish() {
    const int status = ::pclose(pipe_);
    pipe_ = nullptr;
    const std::string out = read_text_file(output_);
    if (status != 0) fail_with(out);
    std::string last;  // its summary is the last line
    std::istringstream lines(out);
    for (std::string l; std::getline(lines, l);)
      if (!l.empty()) last = l;
    const json j = json::parse(last, nullptr, false);
    if (j.is_discarded() || !j.contains("events")) fail_with(out);
    return j;
  }

 private:
  [[noreturn]] void fail() {
    ::pclose(pipe_);
    pipe_ = nullptr;
    fail_with(read_text_file(output_));
  }
  [[noreturn]] void fail_with(const std::string& out) const {
    if (out.find("No module named 'tensorboard'") != std::string::npos)
      throw Error("the Python used has no tensorboard package", cmd_,
                  "run scripts/setup.sh (it installs scripts/requirements.txt into .venv), or pass --python");
    throw Error("the TensorBoard writer failed: " + out.substr(0, 2000), cmd_,
                "see its message; the command is the place above");
  }

  std::string output_, cmd_;
  FILE* pipe_ = nullptr;
};

// ---- the export --------------------------------------------------------------

struct Target {
  std::string name, h5;
  std::map<std::string, std::string> columns;  // the sweep's grid values for this run
};

std::vector<Target> targets(const RunSet& set) {
  std::vector<Target> out;
  std::set<std::string> names;
  for (const auto& r : set.runs) {
    if (r.h5.empty()) continue;  // a trial not started yet
    if (!names.insert(r.name).second)
      throw Error(fmt::format("two runs are named '{}'", r.name), r.h5,
                  "export them into two directories (one --tensorboard DIR each)");
    Target t{r.name, r.h5, {}};
    for (const auto& c : set.param_columns)
      if (auto it = r.index.find(c); it != r.index.end()) t.columns[c] = it->second;
    out.push_back(std::move(t));
  }
  return out;
}

bool has_event_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("events.out.tfevents", 0) == 0) return true;
  return false;
}

// Refuses (or, with force, clears) what this export would write over.
void clear_targets(const std::vector<Target>& ts, bool sweep, const fs::path& dir, bool force) {
  for (const auto& t : ts) {
    const fs::path p = dir / t.name;
    if (!fs::exists(p)) continue;
    if (!force)
      throw Error("the TensorBoard directory already holds this run", p.string(),
                  "pass --force to replace it, or choose another DIR");
    fs::remove_all(p);
  }
  if (!sweep || !has_event_files(dir)) return;
  if (!force)
    throw Error("the TensorBoard directory already holds a sweep's HParams config", dir.string(),
                "pass --force to replace it, or choose another DIR (one sweep per DIR)");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents", 0) == 0) fs::remove(e.path());
}

// A sweep's experiment: every hparam and its values (none: a --follow mirror whose
// trials are still to come), and the metrics its HParams table shows.
std::string hparams_config_line(const std::vector<std::string>& hparam_lines, bool with_values) {
  std::map<std::string, std::vector<json>> values;
  for (const auto& l : hparam_lines) {
    const json j = json::parse(l);
    for (const auto& [k, v] : j["hparams"].items()) {
      auto& vs = values[k];
      if (with_values && std::find(vs.begin(), vs.end(), v) == vs.end()) vs.push_back(v);
    }
  }
  json hp = json::object();
  for (auto& [k, vs] : values) hp[k] = vs;
  return json{{"op", "hparams_config"},
              {"run", ""},
              {"hparams", hp},
              {"metrics", json::array({json::array({"val/loss", "val loss (last)"}),
                                       json::array({"train/loss", "train loss (last)"})})}}
      .dump();
}

std::vector<std::string> hparam_lines_of(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (l.find("\"op\":\"hparams\"") != std::string::npos) out.push_back(l);
  return out;
}

void fill_summary(const json& j, TensorBoardSummary& s) {
  s.tensorboard_version = j.value("tensorboard", "");
  for (const auto& [run, n] : j["events"].items()) s.events += n.get<int64_t>();
}

// Moves each run's directory (and a sweep's root event files) from `staging` into `dir`.
void publish(const fs::path& staging, const fs::path& dir, const std::vector<Target>& ts) {
  for (const auto& t : ts)
    if (fs::exists(staging / t.name)) fs::rename(staging / t.name, dir / t.name);
  for (const auto& e : fs::directory_iterator(staging))
    if (e.path().filename().string().rfind("events.out.tfevents", 0) == 0) fs::rename(e.path(), dir / e.path().filename());
}

struct RemoveOnExit {
  fs::path p;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

TensorBoardSummary export_once(const RunSet& set, const std::vector<Target>& ts, const fs::path& dir,
                               const TensorBoardOptions& o) {
  const fs::path staging = dir / fmt::format(".prism-tensorboard-{}", ::getpid());
  fs::create_directories(staging);
  RemoveOnExit cleanup{staging};
  TensorBoardSummary s;
  s.dir = dir.string();
  std::vector<std::string> lines;
  for (const auto& t : ts) {
    TensorBoardCursor c;
    for (auto& l : tensorboard_lines(RunReader(t.h5), t.name, t.columns, c)) lines.push_back(std::move(l));
    s.runs.push_back(t.name);
  }
  if (set.sweep) lines.push_back(hparams_config_line(hparam_lines_of(lines), /*with_values=*/true));
  Bridge bridge(o, staging.string());
  bridge.send(lines);
  fill_summary(bridge.finish(), s);
  publish(staging, dir, ts);
  return s;
}

// Whether a `prism sweep` runner still holds a sweep directory among `paths`.
bool sweep_runner_active(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    const fs::path lock = fs::path(p) / "sweep.lock";
    if (!fs::exists(lock)) continue;
    try {
      SweepLock::acquire(lock.string(), SweepLock::Mode::Shared, 0, "reading it");
    } catch (const Error&) {
      return true;
    }
  }
  return false;
}

void sleep_unless_stopped(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!stop_requested() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// A --follow mirror between polls.
struct Mirror {
  std::map<std::string, TensorBoardCursor> cursors;
  bool config_sent = false;
  bool waiting = false;  // said that no run is there yet
  int64_t records = 0;
};

// One poll: new rows of every run found (a run seen for the first time is cleared
// first). Returns whether every run has finished.
bool follow_poll(const std::vector<std::string>& paths, const fs::path& dir, const TensorBoardOptions& o, Mirror& m,
                 Bridge& bridge, TensorBoardSummary& s) {
  RunSet set;
  try {
    set = find_runs(paths);
  } catch (const Error& e) {  // not there yet: a run about to start
    if (!m.waiting && o.log) o.log(fmt::format("tensorboard: waiting for a run ({})", e.what()));
    m.waiting = true;
    return false;
  }
  bool finished = true;
  std::vector<std::string> lines;
  for (const auto& t : targets(set)) {
    std::unique_ptr<RunReader> run;
    try {
      run = std::make_unique<RunReader>(t.h5);
    } catch (const Error&) {  // a run.h5 being created right now: next poll
      finished = false;
      continue;
    }
    if (!m.cursors.count(t.name)) {
      clear_targets({t}, false, dir, o.force);
      s.runs.push_back(t.name);
    }
    for (auto& l : tensorboard_lines(*run, t.name, t.columns, m.cursors[t.name])) lines.push_back(std::move(l));
    finished = finished && run->status() != "running";
  }
  if (set.sweep && !m.config_sent) {
    clear_targets({}, true, dir, o.force);
    lines.push_back(hparams_config_line({}, /*with_values=*/false));
    m.config_sent = true;
  }
  bridge.send(lines);
  bridge.flush();
  m.records += static_cast<int64_t>(lines.size());
  if (!lines.empty() && o.log)
    o.log(fmt::format("tensorboard: {} new records of {} run(s) -> {} ({} in all)", lines.size(), m.cursors.size(),
                      dir.string(), m.records));
  return finished;
}

TensorBoardSummary export_follow(const std::vector<std::string>& paths, const fs::path& dir,
                                 const TensorBoardOptions& o) {
  install_stop_handlers();
  TensorBoardSummary s;
  s.dir = dir.string();
  Mirror m;
  Bridge bridge(o, dir.string());
  while (!follow_poll(paths, dir, o, m, bridge, s) || sweep_runner_active(paths)) {
    if (stop_requested()) break;
    sleep_unless_stopped(o.poll_s);
  }
  fill_summary(bridge.finish(), s);
  return s;
}

}  // namespace

std::vector<std::string> tensorboard_lines(const RunReader& run, const std::string& name,
                                           const std::map<std::string, std::string>& hparam_columns,
                                           TensorBoardCursor& cursor) {
  std::vector<std::string> out;
  const std::vector<TrainRow> train = run.train();
  if (!cursor.started) start_run(run, name, hparam_columns, train, cursor, out);
  send_train(name, train, cursor, out);
  send_val(name, run.val(), cursor, out);
  send_distance(name, run.attention(), cursor, out);
  return out;
}

TensorBoardSummary export_tensorboard(const std::vector<std::string>& paths, const std::string& dir,
                                      const TensorBoardOptions& options) {
  fs::create_directories(dir);
  if (options.follow) return export_follow(paths, dir, options);
  const RunSet set = find_runs(paths);
  const std::vector<Target> ts = targets(set);
  if (ts.empty()) throw Error("no run has a run.h5 yet", paths.front(), "export once a run has started, or pass --follow");
  clear_targets(ts, set.sweep, dir, options.force);
  return export_once(set, ts, dir, options);
}

}  // namespace prism
