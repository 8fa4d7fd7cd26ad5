#pragma once
// The Slurm launcher. Each submission is a "wave": a job array with one task
// per run the current stage needs (resources from sweep.slurm), whose tasks call
//   prism sweep <dir> --task-index $SLURM_ARRAY_TASK_ID --rung <k>
// plus a collection job that starts when the array ends (afterany). Collection
// is the same command a user runs, `prism sweep <dir> --launcher slurm`: it
// rebuilds the index and, while work remains (the next halving rung, runs
// interrupted by a time limit), submits the next wave; at the end it prints the
// ranked table. Scripts and task output live in <dir>/slurm/.
#include <string>
#include <vector>

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

// "0-3,5,7-9"
std::string array_spec(const std::vector<int>& indices);

// Building blocks of the job scripts (also post-processing's, post/post_run.h):
std::string shell_quote(const std::string& s);
// "#!/bin/bash" and the #SBATCH lines: job name, output, --chdir (the working
// directory), cpus, and the settings' partition, time, mem, account and extra lines.
std::string sbatch_header(const SlurmSettings& settings, const std::string& job_name, const std::string& output,
                          int cpus);
void write_script(const std::string& path, const std::string& text);  // atomically, executable
// Runs a shell command; returns its stdout (trimmed), or throws prism::Error with its output.
std::string run_command(const std::string& cmd, const std::string& what);

}  // namespace prism
