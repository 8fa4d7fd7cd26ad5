#pragma once
// Slurm: the one place Prism writes #SBATCH lines and calls sbatch or scontrol.
// What a job asks for (SlurmSettings, from a sweep file's sweep.slurm and a post
// file's keys), the headers of trial and bookkeeping jobs, an array submitted with
// its collection job, and a task's requeue after the time-limit warning. A sweep's
// waves (sweep/slurm.h) and post-processing's jobs (post/post_run.h) are built on it;
// the commands themselves run through launch/process.h.
#include <string>
#include <vector>

namespace prism {

// The jobs that keep the books (collect a wave, rebuild the index, submit the next one,
// print the table): seconds of CPU work that must never hold the trials' GPUs. They get
// their own resources, sweep.slurm.collect, and not sweep.slurm.extra (where --gres lives).
struct SlurmCollect {
  std::string partition;           // "": the cluster's default partition, not the trials'
  std::string time = "00:30:00", mem = "2G";
  int cpus = 1;
  std::vector<std::string> extra;  // more #SBATCH lines for these jobs only
};

struct SlurmSettings {
  std::string partition, time, mem, account;
  int cpus_per_task = 0;       // 0: the sweep's threads per trial
  int max_parallel = 0;        // array throttle (%N), 0 = none
  int max_waves = 20;          // resubmissions of interrupted work before giving up
  // Trials ask Slurm for SIGUSR1 this many seconds before their time limit
  // (--signal=B:USR1@N; Slurm may send it up to 60 s earlier): the trial checkpoints,
  // stops, and its array task requeues itself at once. 0: no signal, no requeue.
  int signal_seconds = 120;
  int max_requeues = 50;       // requeues of one array task before leaving it to the next wave
  SlurmCollect collect;
  std::vector<std::string> extra;  // more #SBATCH lines, e.g. "--qos=short"
};

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

// Building blocks of the job scripts (a sweep's waves and post-processing's jobs;
// shell_quote, write_script and run_command are launch/process.h's):
// "#!/bin/bash" and the #SBATCH lines: job name, output, --chdir (the working
// directory), cpus, and the settings' partition, time, mem, account and extra lines.
std::string sbatch_header(const SlurmSettings& settings, const std::string& job_name, const std::string& output,
                          int cpus);

}  // namespace prism
