#pragma once
// Runs trial runs on this machine, each as a child process `prism train`, up to
// `jobs` at once with the threads divided among them.
//
// Why child processes and not threads: a trial that crashes (a segfault, an
// abort in a library, the OOM killer) or hangs takes only itself down; a
// timeout can stop it (SIGTERM: the trainer checkpoints and exits; SIGKILL after
// a grace period); every trial gets its own LibTorch thread pool sized exactly
// (train.threads, OMP_NUM_THREADS), which one process cannot give concurrent
// trials; and what runs is the same `prism train` a user runs by hand.
//
// Children get SIGTERM when the launcher dies (PR_SET_PDEATHSIG), so a killed
// runner leaves checkpointed, resumable runs rather than orphans.
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "prism/sweep/plan.h"
#include "prism/sweep/sweep_dir.h"

namespace prism {

struct TrialRun {
  const Trial* trial = nullptr;
  int rung = 0;
  int64_t steps = 0;       // the budget (train.max_steps of this run)
  std::string dir;         // the run directory
  std::string config;      // the resolved config to run (trial.yaml)
  std::string label;       // for progress lines
};

struct LaunchOptions {
  std::string prism;                  // the prism binary; default: this process's own
  int jobs = 1;
  int threads = 1;                    // per run (train.threads)
  double timeout_s = 0;               // per run attempt; 0 = none
  double grace_s = 60;                // after the timeout's SIGTERM, before SIGKILL
  RetryPolicy retry = RetryPolicy::Untrained;  // which failed runs to rerun (from their checkpoint if they have one)
  // Local runs: children in their own process group, and the launcher forwards
  // one SIGTERM per SIGINT/SIGTERM it receives. Slurm tasks: children stay in
  // the task's group and receive Slurm's signals directly (forwarding as well
  // would be a second signal, which makes the trainer exit without a checkpoint).
  bool own_process_group = true;
  std::function<void(const std::string&)> log;            // progress lines
  std::function<void(const TrialRun&)> on_finished;      // after each run ends (to refresh the index)
};

struct LaunchReport {
  int completed = 0, failed = 0, interrupted = 0;  // runs that ran now
  int skipped_completed = 0, skipped_failed = 0;   // left alone
  bool stopped = false;                            // a signal stopped the launcher
};

// Runs (or resumes, or skips) every run; returns when all are done or, after a
// signal, when the running ones have checkpointed.
LaunchReport launch_local(const std::vector<TrialRun>& runs, const LaunchOptions& options);

// The path of the running executable (after a rebuild replaced it, the path of the new build).
std::string self_executable();

// Starts `prism args...` as a child process (what every launched run is): its
// stdout and stderr appended to `log_path`, stdin from /dev/null, OpenMP and MKL
// sized to `threads`, SIGTERM when this process dies, in a process group of its
// own when `own_group`. Returns its pid once `prism` is executing. A binary that cannot be
// executed for a moment (a build relinking it: busy, missing or half-written) is retried for up
// to `exec_wait_s`, so a sweep survives a rebuild of the prism it runs; throws prism::Error when
// it cannot start, naming the reason (execve's errno).
pid_t spawn_prism(const std::string& prism, const std::vector<std::string>& args, const std::string& log_path,
                  int threads, bool own_group, double exec_wait_s = 120);

}  // namespace prism
