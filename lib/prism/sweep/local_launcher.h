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

#include "prism/launch/process.h"
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
  int signal = 0;                                  // the last one (SIGUSR1: a cluster's warning)
};

// Runs (or resumes, or skips) every run; returns when all are done or, after a
// signal, when the running ones have checkpointed.
LaunchReport launch_local(const std::vector<TrialRun>& runs, const LaunchOptions& options);

}  // namespace prism
