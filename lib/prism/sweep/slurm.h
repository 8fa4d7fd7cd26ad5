#pragma once
// The Slurm launcher. Each submission is a "wave": a job array with one task
// per run the current stage needs (resources from sweep.slurm), whose tasks call
//   prism sweep <dir> --task-index $SLURM_ARRAY_TASK_ID --rung <k>
// plus a collection job that starts when the array ends (afterany). Collection
// is the same command a user runs, `prism sweep <dir> --launcher slurm`: it
// rebuilds the index and, while work remains (the next halving rung, runs
// interrupted by a time limit), submits the next wave; at the end it prints the
// ranked table. Scripts and task output live in <dir>/slurm/.
// A task is warned ahead of its time limit (SIGUSR1, sweep.slurm.signal_seconds):
// its trial checkpoints and stops, and the task requeues itself (requeue_after_warning),
// so the trial continues at once rather than in the next wave.
#include <string>
#include <vector>

#include "prism/launch/process.h"
#include "prism/launch/slurm.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/sweep.h"

namespace prism {

struct SlurmOptions {
  std::string dir;                 // the sweep directory
  std::string prism;               // the binary the tasks run (default: this one, absolute)
  int threads = 0;                 // threads per task when sweep.slurm.cpus_per_task is 0 (0: 1)
  RetryPolicy retry = RetryPolicy::Untrained;  // for this wave; the collection job's waves use None
  bool force = false;
  bool submit = true;              // false: write the scripts and print the sbatch commands
  std::function<void(const std::string&)> log;
};

struct SlurmSubmission {
  bool finished = false;           // nothing left to run: the index and table are final
  std::string array_script, collect_script;
  std::string array_job, collect_job;  // job ids ("" when not submitted)
  std::vector<int> indices;        // the array's task indices (trial indices)
  int rung = 0;
  SweepSummary summary;            // the index as collected before submitting
};

// Collects, then writes and (unless !submit) submits the next wave.
SlurmSubmission submit_to_slurm(const SweepPlan& plan, const SlurmOptions& options);

// One array task: runs trial `index` at rung `rung` here. Returns the exit code.
int run_slurm_task(const SweepPlan& plan, const std::string& dir, int index, int rung, const std::string& prism,
                   RetryPolicy retry);

}  // namespace prism
