#include "prism/sweep/local_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/sweep/run_result.h"
#include "prism/sweep/sweep_dir.h"

extern char** environ;

namespace fs = std::filesystem;

namespace prism {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_signals{0};
void on_signal(int) { g_signals.fetch_add(1); }

// SIGINT/SIGTERM count requests to stop while the launcher runs.
class SignalScope {
 public:
  SignalScope() {
    g_signals = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

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

pid_t spawn(const std::string& prism, const std::vector<std::string>& args, const std::string& log_path, int threads,
            bool own_group) {
  std::vector<std::string> argv_s{prism};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("OMP_NUM_THREADS=", 0) == 0 || kv.rfind("MKL_NUM_THREADS=", 0) == 0) continue;
    env_s.push_back(kv);
  }
  env_s.push_back(fmt::format("OMP_NUM_THREADS={}", threads));
  env_s.push_back(fmt::format("MKL_NUM_THREADS={}", threads));
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0)
    throw Error(fmt::format("cannot open the trial log: {}", std::strerror(errno)), log_path,
                "check that the sweep directory is writable");
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw Error(fmt::format("cannot start a trial process: {}", std::strerror(errno)), "prism sweep",
                "lower --jobs or free memory");
  }
  if (pid == 0) {  // the child: only async-signal-safe calls until execve
    if (own_group) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(129);  // the launcher died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execve(prism.c_str(), argv.data(), envp.data());
    const char msg[] = "prism sweep: error: cannot execute the prism binary for this trial\n";
    ssize_t n = write(2, msg, sizeof(msg) - 1);
    (void)n;
    _exit(127);
  }
  if (own_group) setpgid(pid, pid);  // also here, so a signal sent right away finds the group
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  return pid;
}

struct Active {
  const TrialRun* run = nullptr;
  size_t position = 0;
  pid_t pid = -1;
  Clock::time_point start;
  bool timed_out = false;
  Clock::time_point kill_at;
  RunRecord record;
  std::string log_path;
  std::streamoff log_offset = 0;
  std::unique_ptr<SweepLock> lock;
};

}  // namespace

std::string self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the prism executable (/proc/self/exe)", "prism sweep", "run prism by its full path");
  return p.string();
}

LaunchReport launch_local(const std::vector<TrialRun>& runs, const LaunchOptions& o) {
  LaunchReport report;
  const std::string prism = o.prism.empty() ? self_executable() : o.prism;
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
    else std::cout << s << std::endl;
  };
  const int jobs = std::max(1, o.jobs);
  const size_t total = runs.size();
  const int width = static_cast<int>(std::to_string(total).size());
  auto tag = [&](size_t pos) { return fmt::format("[{:>{}}/{}]", pos + 1, width, total); };

  // A trial with its own process group is signalled as a whole (anything it started goes too).
  auto group = [&](pid_t pid) { return o.own_process_group ? -pid : pid; };
  SignalScope signals;
  int signals_seen = 0;
  bool stopping = false;
  std::vector<Active> active;
  size_t next = 0;

  auto start = [&](size_t pos) {
    const TrialRun& run = runs[pos];
    fs::create_directories(run.dir);
    RunInspection ins = inspect_run(run.dir);
    bool resume = false, force = false;
    switch (ins.state) {
      case RunState::Completed:
        ++report.skipped_completed;
        log(fmt::format("{} skip    {} (completed)", tag(pos), run.label));
        return;
      case RunState::Failed:
        if (!needs_run(ins, o.retry)) {
          ++report.skipped_failed;
          log(fmt::format("{} skip    {} (failed earlier: {}; --retry-failed reruns it)", tag(pos), run.label,
                          ins.record.message.empty() ? "see its train.log" : ins.record.message));
          return;
        }
        if (!ins.trained)
          log(fmt::format("{} retry   {} (it failed before training: {})", tag(pos), run.label,
                          ins.record.message.empty() ? "see its train.log" : ins.record.message));
        resume = ins.checkpoint.has_value();
        force = !resume;
        break;
      case RunState::Resumable:
        resume = true;
        break;
      case RunState::Restart:
        force = true;
        break;
      case RunState::Pending:
        break;
    }
    Active a;
    a.run = &run;
    a.position = pos;
    try {
      a.lock = std::make_unique<SweepLock>(SweepLock::acquire((fs::path(run.dir) / ".run.lock").string(),
                                                              SweepLock::Mode::Exclusive, 0, "running this trial"));
    } catch (const Error&) {
      log(fmt::format("{} skip    {} (another process is running it)", tag(pos), run.label));
      return;
    }
    std::vector<std::string> args;
    const std::string threads = fmt::format("train.threads={}", o.threads);
    if (resume) {
      args = {"train", "--resume", run.dir, threads};
    } else {
      const std::string yaml = (fs::path(run.dir) / "trial.yaml").string();
      write_file_atomic(yaml, run.config);
      args = {"train", yaml, "--out", run.dir, threads};
      if (force) args.push_back("--force");
    }
    a.log_path = (fs::path(run.dir) / "train.log").string();
    a.log_offset = fs::exists(a.log_path) ? static_cast<std::streamoff>(fs::file_size(a.log_path)) : 0;
    a.record = ins.record;
    a.record.status = "running";
    a.record.message.clear();
    a.record.attempts += 1;
    a.record.started = now_iso();
    a.record.finished.clear();
    a.record.threads = o.threads;
    write_record(run.dir, a.record);
    a.start = Clock::now();
    a.pid = spawn(prism, args, a.log_path, o.threads, o.own_process_group);
    log(fmt::format("{} {} {} ({}{} thread{})", tag(pos), resume ? "resume " : "start  ", run.label,
                    resume ? fmt::format("from step {}, ", checkpoint_step(*ins.checkpoint)) : "", o.threads,
                    o.threads == 1 ? "" : "s"));
    active.push_back(std::move(a));
  };

  auto finish = [&](Active& a, int wait_status) {
    const TrialRun& run = *a.run;
    const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
    const double elapsed = seconds(Clock::now() - a.start);
    RunInspection ins = inspect_run(run.dir);
    RunRecord& r = a.record;
    r.exit_code = code;
    r.wall_s += elapsed;
    r.finished = now_iso();
    std::optional<RunResult> result;
    if (!ins.h5_status.empty() && ins.h5_status != "unreadable") result = read_run_result((fs::path(run.dir) / "run.h5").string());
    if (code == 0 && ins.h5_status == "completed") {
      r.status = "completed";
      ++report.completed;
      log(fmt::format("{} done    {}  val loss {:.4f} (best {:.4f}), {:.1f} s", tag(a.position), run.label,
                      result->final_val_loss(), result->best_val_loss(), elapsed));
    } else if (a.timed_out) {
      r.status = "failed";
      r.message = fmt::format("timed out after {:.0f} s (timeout {:.0f} s) at step {}{}", elapsed, o.timeout_s,
                              result ? result->steps : 0,
                              ins.checkpoint ? "; its checkpoint is kept and --retry-failed resumes it" : "");
      ++report.failed;
      log(fmt::format("{} FAILED  {}: {}", tag(a.position), run.label, r.message));
    } else if (stopping || code == 130 || code == 128 + SIGTERM || code == 128 + SIGINT ||
               ins.h5_status == "interrupted") {
      // We asked it to stop (or someone else did): whatever its exit, its checkpoints decide the resume.
      r.status = "interrupted";
      r.message = stopping ? "stopped with the sweep; the next run of the sweep resumes it"
                           : "stopped by a signal; the next run of the sweep resumes it";
      ++report.interrupted;
      log(fmt::format("{} stopped {} at step {} ({})", tag(a.position), run.label, result ? result->steps : 0,
                      ins.checkpoint ? "checkpoint kept" : "no checkpoint yet"));
    } else {
      r.status = "failed";
      const std::string line = last_error_line(a.log_path, a.log_offset);
      r.message = WIFSIGNALED(wait_status)
                      ? fmt::format("crashed (signal {}){}", WTERMSIG(wait_status), line.empty() ? "" : ": " + line)
                      : fmt::format("exit code {}: {}", code, line.empty() ? "no output" : line);
      ++report.failed;
      log(fmt::format("{} FAILED  {}: {} (log: {})", tag(a.position), run.label, r.message, a.log_path));
    }
    write_record(run.dir, r);
    a.lock.reset();
    if (o.on_finished) o.on_finished(run);
  };

  while (next < total || !active.empty()) {
    if (g_signals.load() > signals_seen) {
      signals_seen = g_signals.load();
      if (!stopping) log("prism sweep: stopping: running trials checkpoint and stop; rerun the sweep to continue");
      stopping = true;
      report.stopped = true;
      if (o.own_process_group)
        for (auto& a : active) kill(-a.pid, SIGTERM);  // one per signal received: the second one is immediate
    }
    while (!stopping && next < total && static_cast<int>(active.size()) < jobs) start(next++);
    if (stopping) next = total;
    for (size_t i = 0; i < active.size();) {
      int status = 0;
      const pid_t r = waitpid(active[i].pid, &status, WNOHANG);
      if (r == active[i].pid) {
        finish(active[i], status);
        active.erase(active.begin() + static_cast<long>(i));
        continue;
      }
      Active& a = active[i];
      if (o.timeout_s > 0 && !a.timed_out && seconds(Clock::now() - a.start) > o.timeout_s) {
        a.timed_out = true;
        a.kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.grace_s));
        log(fmt::format("{} timeout {} after {:.0f} s: asking it to checkpoint and stop", tag(a.position), a.run->label,
                        o.timeout_s));
        kill(group(a.pid), SIGTERM);
      } else if (a.timed_out && Clock::now() > a.kill_at) {
        kill(group(a.pid), SIGKILL);
        a.kill_at = Clock::now() + std::chrono::hours(1);
      }
      ++i;
    }
    if (!active.empty() || next < total) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return report;
}

}  // namespace prism
