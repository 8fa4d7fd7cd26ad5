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

// The header of a bookkeeping job (collection, index, next wave, table): sweep.slurm.collect's
// partition, time, memory, CPUs and extra lines with the sweep's account; never the trials'
// partition or extra lines (their GPUs).
std::string collect_header(const SlurmSettings& settings, const std::string& job_name, const std::string& output);

// Submits an array job, then its collection job to start once every task has ended
// (--dependency=afterany). Returns their job ids; throws prism::Error with sbatch's words.
struct ArrayJobs {
  std::string array, collect;
};
ArrayJobs submit_array_then_collect(const std::string& array_script, const std::string& collect_script);

// After a trial stopped on a signal: when it was Slurm's warning (SIGUSR1, from the
// --signal line of requeue_lines) inside a Slurm job, requeues this job (the array
// task) with scontrol so the trial resumes at once from the checkpoint it just wrote,
// up to sweep.slurm.max_requeues times; returns 0 then, else 130 (the next wave resumes it).
int requeue_after_warning(const SlurmSettings& settings, int signal);

// The #SBATCH lines that make a trial's array task preemption- and time-limit-safe:
// --signal=B:USR1@<signal_seconds>, --requeue, --open-mode=append ("" when signal_seconds is 0).
std::string requeue_lines(const SlurmSettings& settings);

// "0-3,5,7-9"
std::string array_spec(const std::vector<int>& indices);

// Building blocks of the job scripts (also post-processing's, post/post_run.h;
// shell_quote, write_script and run_command are launch/process.h's):
// "#!/bin/bash" and the #SBATCH lines: job name, output, --chdir (the working
// directory), cpus, and the settings' partition, time, mem, account and extra lines.
std::string sbatch_header(const SlurmSettings& settings, const std::string& job_name, const std::string& output,
                          int cpus);

}  // namespace prism
