#include "prism/sweep/local_launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/launch/pool.h"
#include "prism/launch/signals.h"
#include "prism/sweep/run_result.h"
#include "prism/sweep/sweep_dir.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

std::string last_error_line(const std::string& log, std::streamoff from) {
  std::ifstream in(log);
  in.seekg(from);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
    if (line.find("error") != std::string::npos) error = line;
  }
  std::string out = error.empty() ? last : error;
  if (out.size() > 400) out = out.substr(0, 400) + "...";
  return out;
}

int64_t checkpoint_step(const std::string& ckpt) {
  const std::string name = fs::path(ckpt).filename().string();
  const auto digits = name.find_first_of("0123456789");
  return digits == std::string::npos ? -1 : std::stoll(name.substr(digits));
}

}  // namespace

namespace {

// One run in progress: its attempt's record and its lock (the pool has its process).
struct Active {
  RunRecord record;
  std::string log_path;
  std::streamoff log_offset = 0;
  std::unique_ptr<SweepLock> lock;
};

// How a run starts: from scratch, from its checkpoint, or over a run that left nothing to resume.
enum class StartMode { Fresh, Resume, Restart };

// What launch_local does: the runs through a process pool (launch/pool.h), each
// run's start decided from what its directory holds, its record kept, and the report.
class LocalLauncher {
 public:
  LocalLauncher(const std::vector<TrialRun>& runs, const LaunchOptions& o)
      : runs_(runs), o_(o), prism_(o.prism.empty() ? self_executable() : o.prism),
        width_(static_cast<int>(std::to_string(runs.size()).size())) {}

  LaunchReport run() {
    PoolOptions pool;
    pool.jobs = o_.jobs;
    pool.timeout_s = o_.timeout_s;
    pool.grace_s = o_.grace_s;
    pool.signal_group = o_.own_process_group;  // a trial with its own group is signalled as a whole
    PoolHooks hooks;
    hooks.start = [this](size_t pos) { return start(pos); };
    hooks.finished = [this](const PoolChild& c, int status) { finish(c, status); };
    hooks.timed_out = [this](const PoolChild& c) {
      log(fmt::format("{} timeout {} after {:.0f} s: asking it to checkpoint and stop", tag(c.item), runs_[c.item].label,
                      o_.timeout_s));
    };
    hooks.stop = [this](const std::vector<PoolChild>& running, const PoolSignals& s) { stop(running, s); };
    const PoolResult r = run_pool(runs_.size(), pool, hooks);
    report_.stopped = r.stopped;
    report_.signal = r.signal;
    return report_;
  }

 private:
  void log(const std::string& s) const {
    if (o_.log) o_.log(s);
    else std::cout << s << std::endl;
  }
  std::string tag(size_t pos) const { return fmt::format("[{:>{}}/{}]", pos + 1, width_, runs_.size()); }

  // A signal to the launcher stops it: no new runs, and the running ones are asked to checkpoint and stop.
  // SIGINT/SIGTERM: one SIGTERM per signal to each trial's own process group (the second is immediate);
  // without groups of their own the trials got it with ours. SIGUSR1, which Slurm sends to the job's
  // shell alone ahead of a time limit (--signal=B:USR1@T), is passed on to each trial.
  void stop(const std::vector<PoolChild>& running, const PoolSignals& s) {
    if (s.first)
      log(fmt::format("prism sweep: {}: stopping: running trials checkpoint and stop; rerun the sweep to continue",
                      signal_name(s.last)));
    stopping_ = true;
    for (const auto& c : running) {
      if (s.usr1 > 0) kill(c.pid, SIGUSR1);  // a trainer ignores a repeated USR1 (launch/signals.h)
      if (o_.own_process_group)
        for (int i = 0; i < s.others; ++i) kill(-c.pid, SIGTERM);
    }
  }
  // How the run at `pos` starts, or nothing when it is skipped (logged and counted).
  std::optional<StartMode> start_mode(size_t pos, const RunInspection& ins) {
    const TrialRun& run = runs_[pos];
    switch (ins.state) {
      case RunState::Completed:
        ++report_.skipped_completed;
        log(fmt::format("{} skip    {} (completed)", tag(pos), run.label));
        return std::nullopt;
      case RunState::Failed:
        if (!needs_run(ins, o_.retry)) {
          ++report_.skipped_failed;
          log(fmt::format("{} skip    {} (failed earlier: {}; --retry-failed reruns it)", tag(pos), run.label,
                          ins.record.message.empty() ? "see its train.log" : ins.record.message));
          return std::nullopt;
        }
        if (!ins.trained)
          log(fmt::format("{} retry   {} (it failed before training: {})", tag(pos), run.label,
                          ins.record.message.empty() ? "see its train.log" : ins.record.message));
        return ins.checkpoint ? StartMode::Resume : StartMode::Restart;
      case RunState::Resumable: return StartMode::Resume;
      case RunState::Restart: return StartMode::Restart;
      case RunState::Pending: break;
    }
    return StartMode::Fresh;
  }

  // The `prism train` arguments of a run; a run that does not resume gets its trial.yaml written.
  std::vector<std::string> train_command(const TrialRun& run, StartMode mode) const {
    const std::string threads = fmt::format("train.threads={}", o_.threads);
    if (mode == StartMode::Resume) return {"train", "--resume", run.dir, threads};
    const std::string yaml = (fs::path(run.dir) / "trial.yaml").string();
    write_file_atomic(yaml, run.config);
    std::vector<std::string> args{"train", yaml, "--out", run.dir, threads};
    if (mode == StartMode::Restart) args.push_back("--force");
    return args;
  }

  std::optional<pid_t> start(size_t pos) {
    const TrialRun& run = runs_[pos];
    fs::create_directories(run.dir);
    const RunInspection ins = inspect_run(run.dir);
    const std::optional<StartMode> mode = start_mode(pos, ins);
    if (!mode) return std::nullopt;
    Active a;
    try {
      a.lock = std::make_unique<SweepLock>(SweepLock::acquire((fs::path(run.dir) / ".run.lock").string(),
                                                              SweepLock::Mode::Exclusive, 0, "running this trial"));
    } catch (const Error&) {
      log(fmt::format("{} skip    {} (another process is running it)", tag(pos), run.label));
      return std::nullopt;
    }
    const std::vector<std::string> args = train_command(run, *mode);
    a.log_path = (fs::path(run.dir) / "train.log").string();
    a.log_offset = fs::exists(a.log_path) ? static_cast<std::streamoff>(fs::file_size(a.log_path)) : 0;
    a.record = ins.record;
    a.record.status = "running";
    a.record.message.clear();
    a.record.attempts += 1;
    a.record.started = now_iso();
    a.record.finished.clear();
    a.record.threads = o_.threads;
    write_record(run.dir, a.record);
    const pid_t pid = spawn_prism(prism_, args, a.log_path, o_.threads, o_.own_process_group);
    const bool resume = *mode == StartMode::Resume;
    log(fmt::format("{} {} {} ({}{} thread{})", tag(pos), resume ? "resume " : "start  ", run.label,
                    resume ? fmt::format("from step {}, ", checkpoint_step(*ins.checkpoint)) : "", o_.threads,
                    o_.threads == 1 ? "" : "s"));
    active_.emplace(pos, std::move(a));
    return pid;
  }

  // Records how a run ended (trial.json), counts it, and tells on_finished.
  void finish(const PoolChild& c, int wait_status) {
    const TrialRun& run = runs_[c.item];
    Active& a = active_.at(c.item);
    const int code = exit_code(wait_status);
    const double elapsed = c.seconds();
    const RunInspection ins = inspect_run(run.dir);
    a.record.exit_code = code;
    a.record.wall_s += elapsed;
    a.record.finished = now_iso();
    std::optional<RunResult> result;
    if (!ins.h5_status.empty() && ins.h5_status != "unreadable")
      result = read_run_result((fs::path(run.dir) / "run.h5").string());
    const int64_t steps = result ? result->steps : 0;
    if (code == 0 && ins.h5_status == "completed") {
      completed(c.item, a, *result, elapsed);
    } else if (c.timed_out) {
      timed_out(c.item, a, steps, ins.checkpoint.has_value(), elapsed);
    } else if (stopping_ || code == 130 || code == 128 + SIGTERM || code == 128 + SIGINT || code == 128 + SIGUSR1 ||
               ins.h5_status == "interrupted") {
      interrupted(c.item, a, steps, ins.checkpoint.has_value());
    } else {
      failed(c.item, a, wait_status);
    }
    write_record(run.dir, a.record);
    active_.erase(c.item);  // and its lock
    if (o_.on_finished) o_.on_finished(run);
  }

  void completed(size_t pos, Active& a, const RunResult& result, double elapsed) {
    a.record.status = "completed";
    ++report_.completed;
    log(fmt::format("{} done    {}  val loss {:.4f} (best {:.4f}), {:.1f} s", tag(pos), runs_[pos].label,
                    result.final_val_loss(), result.best_val_loss(), elapsed));
  }

  void timed_out(size_t pos, Active& a, int64_t steps, bool has_checkpoint, double elapsed) {
    a.record.status = "failed";
    a.record.message = fmt::format("timed out after {:.0f} s (timeout {:.0f} s) at step {}{}", elapsed, o_.timeout_s,
                                   steps, has_checkpoint ? "; its checkpoint is kept and --retry-failed resumes it" : "");
    ++report_.failed;
    log(fmt::format("{} FAILED  {}: {}", tag(pos), runs_[pos].label, a.record.message));
  }

  // We asked it to stop (or someone else did): whatever its exit, its checkpoints decide the resume.
  void interrupted(size_t pos, Active& a, int64_t steps, bool has_checkpoint) {
    a.record.status = "interrupted";
    a.record.message = stopping_ ? "stopped with the sweep; the next run of the sweep resumes it"
                                 : "stopped by a signal; the next run of the sweep resumes it";
    ++report_.interrupted;
    log(fmt::format("{} stopped {} at step {} ({})", tag(pos), runs_[pos].label, steps,
                    has_checkpoint ? "checkpoint kept" : "no checkpoint yet"));
  }

  void failed(size_t pos, Active& a, int wait_status) {
    a.record.status = "failed";
    const std::string line = last_error_line(a.log_path, a.log_offset);
    a.record.message = WIFSIGNALED(wait_status)
                           ? fmt::format("crashed (signal {}){}", WTERMSIG(wait_status), line.empty() ? "" : ": " + line)
                           : fmt::format("exit code {}: {}", exit_code(wait_status), line.empty() ? "no output" : line);
    ++report_.failed;
    log(fmt::format("{} FAILED  {}: {} (log: {})", tag(pos), runs_[pos].label, a.record.message, a.log_path));
  }

  const std::vector<TrialRun>& runs_;
  const LaunchOptions& o_;
  const std::string prism_;
  const int width_;                 // digits of the run count, for the [i/n] tags
  bool stopping_ = false;           // a signal stopped the launcher
  std::map<size_t, Active> active_;  // by the run's position
  LaunchReport report_;
};

}  // namespace

LaunchReport launch_local(const std::vector<TrialRun>& runs, const LaunchOptions& options) {
  return LocalLauncher(runs, options).run();
}

}  // namespace prism
