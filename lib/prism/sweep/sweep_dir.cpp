#include "prism/sweep/sweep_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/sweep/halving.h"
#include "prism/sweep/run_result.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

// The first difference between two plans, for the "different sweep" error.
std::string first_difference(const SweepPlan& old_plan, const SweepPlan& plan) {
  const auto& a = old_plan.settings.halving;
  const auto& b = plan.settings.halving;
  if (a.enabled != b.enabled || (b.enabled && (a.eta != b.eta || a.min_steps != b.min_steps ||
                                               a.keep_baseline != b.keep_baseline)))
    return "successive halving settings differ";
  std::set<std::string> old_names;
  for (const auto& t : old_plan.trials) old_names.insert(t.name);
  for (const auto& t : plan.trials) {
    if (!old_names.count(t.name)) return fmt::format("trial {} is new", t.name);
    const Trial& o = old_plan.trial(t.name);
    if (o.config != t.config) {
      std::istringstream x(o.config), y(t.config);
      std::string lx, ly;
      while (std::getline(x, lx) && std::getline(y, ly))
        if (lx != ly) return fmt::format("trial {} changed: '{}' is now '{}'", t.name, lx, ly);
      return fmt::format("trial {} changed", t.name);
    }
  }
  for (const auto& t : old_plan.trials)
    if (std::none_of(plan.trials.begin(), plan.trials.end(), [&](const Trial& n) { return n.name == t.name; }))
      return fmt::format("trial {} is gone", t.name);
  return "the plans differ";
}

// Whether `plan` has the earlier trial `t` unchanged: the same name and config.
bool unchanged_in(const SweepPlan& plan, const Trial& t) {
  return std::any_of(plan.trials.begin(), plan.trials.end(),
                     [&](const Trial& n) { return n.name == t.name && n.config == t.config; });
}

// `plan` is `old_plan` with more trials: every earlier one unchanged, and no
// successive halving (a new trial would change which trials each rung promotes).
bool grows(const SweepPlan& old_plan, const SweepPlan& plan) {
  if (old_plan.settings.halving.enabled || plan.settings.halving.enabled) return false;
  return plan.trials.size() > old_plan.trials.size() &&
         std::all_of(old_plan.trials.begin(), old_plan.trials.end(), [&](const Trial& o) { return unchanged_in(plan, o); });
}

}  // namespace

std::string now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string run_dir(const std::string& sweep_dir, const Trial& t, int rung, bool halving) {
  fs::path p = fs::path(sweep_dir) / t.name;
  if (halving) p /= fmt::format("rung{}", rung);
  return p.string();
}

SweepLock SweepLock::acquire(const std::string& path, Mode mode, double wait_s, const std::string& purpose) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(fmt::format("cannot open the lock file: {}", std::strerror(errno)), path,
                "check that the sweep directory is writable");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  const int op = (mode == Mode::Exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
  while (::flock(fd, op) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      ::close(fd);
      throw Error(fmt::format("cannot lock: {}", std::strerror(errno)), path, "check the file system supports flock");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // Shared holders are Slurm tasks; an exclusive holder wrote who it is.
      std::string holder;
      if (mode == Mode::Shared || ::flock(fd, LOCK_SH | LOCK_NB) != 0) holder = read_text(path);
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      ::close(fd);
      throw Error(fmt::format("the sweep directory is in use{}", holder.empty() ? " (by Slurm tasks of this sweep)"
                                                                                : " by " + holder),
                  fs::path(path).parent_path().string(),
                  fmt::format("wait for that runner to finish (or stop it) before {}; two runners never write the "
                              "same sweep directory",
                              purpose));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (mode == Mode::Exclusive) {
    const std::string who = fmt::format("prism sweep (pid {} on {}, since {}, {})\n", getpid(), hostname(), now_iso(), purpose);
    if (ftruncate(fd, 0) == 0) {
      ssize_t n = pwrite(fd, who.data(), who.size(), 0);
      (void)n;
    }
  }
  SweepLock lock(fd);
  lock.exclusive_ = mode == Mode::Exclusive;
  return lock;
}

SweepLock::~SweepLock() {
  if (fd_ < 0) return;
  if (exclusive_) {  // the holder's line goes with the lock (a killed holder's stays, without a lock)
    const int ignored = ftruncate(fd_, 0);
    (void)ignored;
  }
  ::close(fd_);  // closing the descriptor releases the flock
}

RunRecord read_record(const std::string& dir) {
  RunRecord r;
  const std::string path = (fs::path(dir) / "trial.json").string();
  if (!fs::exists(path)) return r;
  try {
    auto j = nlohmann::json::parse(read_text(path));
    r.status = j.value("status", r.status);
    r.message = j.value("message", "");
    r.attempts = j.value("attempts", 0);
    r.exit_code = j.value("exit_code", 0);
    r.wall_s = j.value("wall_s", 0.0);
    r.started = j.value("started", "");
    r.finished = j.value("finished", "");
    r.threads = j.value("threads", 0);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("the runner's record is not JSON ({})", e.what()), path,
                "delete it (the run's own run.h5 is the record that counts) and rerun");
  }
  return r;
}

void write_record(const std::string& dir, const RunRecord& r) {
  nlohmann::json j{{"status", r.status},     {"message", r.message}, {"attempts", r.attempts},
                   {"exit_code", r.exit_code}, {"wall_s", r.wall_s},   {"started", r.started},
                   {"finished", r.finished}, {"threads", r.threads}};
  write_file_atomic((fs::path(dir) / "trial.json").string(), j.dump(2) + "\n");
}

RunInspection inspect_run(const std::string& dir) {
  RunInspection ins;
  ins.record = read_record(dir);
  const std::string h5 = (fs::path(dir) / "run.h5").string();
  const bool has_h5 = fs::exists(h5);
  int64_t steps = 0;
  if (has_h5) {
    try {
      const RunResult r = read_run_result(h5);
      ins.h5_status = r.status;
      steps = r.steps;
    } catch (const Error&) {
      ins.h5_status = "unreadable";
    }
  }
  if (fs::exists(fs::path(dir) / "checkpoints")) ins.checkpoint = latest_checkpoint(dir);
  ins.trained = steps > 0 || ins.checkpoint.has_value();
  if (ins.h5_status == "completed") ins.state = RunState::Completed;
  else if (ins.record.status == "failed" || ins.h5_status == "failed") ins.state = RunState::Failed;
  else if (has_h5 || ins.record.status == "running" || ins.record.status == "interrupted")
    ins.state = ins.checkpoint ? RunState::Resumable : RunState::Restart;
  else ins.state = RunState::Pending;
  return ins;
}

bool needs_run(const RunInspection& run, RetryPolicy retry) {
  switch (run.state) {
    case RunState::Completed: return false;
    case RunState::Failed: return retry == RetryPolicy::All || (retry == RetryPolicy::Untrained && !run.trained);
    default: return true;
  }
}

std::string SweepDirChange::message() const {
  if (!replaced.empty()) return fmt::format("--force: the previous sweep's other trials and index moved to {}", replaced);
  if (added > 0)
    return fmt::format("the grid grew: {} new trial{}; the previous {} are kept (their runs are not redone)", added,
                       added == 1 ? "" : "s", kept);
  return "";
}

SweepDirChange prepare_sweep_dir(const std::string& dir, const SweepPlan& plan, bool force, bool allow_growth) {
  const fs::path root(dir);
  const fs::path yaml = root / "sweep.yaml";
  std::error_code ec;
  if (fs::exists(root) && !fs::is_directory(root))
    throw Error("the sweep output is a file, not a directory", dir, "choose another --out");
  if (!fs::exists(yaml)) {
    if (fs::exists(root) && !fs::is_empty(root, ec) && !force) {
      bool only_lock = true;
      for (const auto& e : fs::directory_iterator(root)) only_lock = only_lock && e.path().filename() == "sweep.lock";
      if (!only_lock)
        throw Error("the directory exists, is not empty and holds no sweep.yaml", dir,
                    "choose another --out, or --force to write the sweep into it anyway (nothing there is removed)");
    }
    fs::create_directories(root, ec);
    if (ec) throw Error(fmt::format("cannot create the sweep directory: {}", ec.message()), dir, "check the path and permissions");
    write_file_atomic(yaml.string(), plan_to_yaml(plan));
    return {};
  }
  const SweepPlan old_plan = plan_from_yaml(yaml.string());
  if (old_plan.definition() == plan.definition()) {
    write_file_atomic(yaml.string(), plan_to_yaml(plan));  // same trials; settings (jobs, ...) may differ
    return {};
  }
  if (allow_growth && grows(old_plan, plan)) {  // the index is rewritten from every trial when the sweep ends
    write_file_atomic(yaml.string(), plan_to_yaml(plan));
    SweepDirChange c;
    c.kept = old_plan.trials.size();
    c.added = plan.trials.size() - old_plan.trials.size();
    return c;
  }
  const std::string why = first_difference(old_plan, plan);
  if (!force)
    throw Error(fmt::format("the sweep directory was made by a different sweep ({}; {}): {}", old_plan.source,
                            old_plan.settings.name, why),
                yaml.string(),
                "use another --out for this sweep, or --force to take the directory over (finished trials that "
                "this sweep shares are kept; the rest move to a replaced-<time>/ folder)");
  // Keep the trials whose name and config (and halving rule) are unchanged.
  // Rung budgets depend on these; the runs of another budget cannot be reused.
  const bool halving_same = old_plan.settings.halving.enabled == plan.settings.halving.enabled &&
                            old_plan.settings.halving.eta == plan.settings.halving.eta &&
                            old_plan.settings.halving.min_steps == plan.settings.halving.min_steps;
  std::string stamp = now_iso();
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  const fs::path replaced = root / ("replaced-" + stamp);
  auto move_away = [&](const fs::path& p) {
    if (!fs::exists(p)) return;
    fs::create_directories(replaced);
    fs::rename(p, replaced / p.filename());
  };
  for (const auto& t : old_plan.trials)
    if (!halving_same || !unchanged_in(plan, t)) move_away(root / t.name);
  for (const char* f : {"sweep.h5", "summary.csv", "ranking.txt", "halving.csv"}) move_away(root / f);
  fs::create_directories(replaced);
  fs::copy_file(yaml, replaced / "sweep.yaml", fs::copy_options::overwrite_existing);
  write_file_atomic(yaml.string(), plan_to_yaml(plan));
  SweepDirChange c;
  c.replaced = replaced.string();
  return c;
}

std::string final_run_dir(const SweepPlan& plan, const std::string& sweep_dir, const Trial& t) {
  const bool halving = plan.settings.halving.enabled;
  const int last = halving ? static_cast<int>(rung_budgets(t.max_steps, plan.settings.halving).size()) - 1 : 0;
  return run_dir(sweep_dir, t, last, halving);
}

bool final_run_completed(const SweepPlan& plan, const std::string& sweep_dir, const Trial& t) {
  return inspect_run(final_run_dir(plan, sweep_dir, t)).state == RunState::Completed;
}

const Trial* baseline_trial(const SweepPlan& plan, const Trial& t) {
  if (t.baseline) return nullptr;
  for (const auto& b : plan.trials)
    if (b.baseline && b.seed == t.seed && b.params == t.params &&
        b.schedule.n_layer() == t.schedule.n_layer())
      return &b;
  return nullptr;
}

}  // namespace prism
