#include "prism/launch/slurm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "prism/launch/process.h"

namespace fs = std::filesystem;

namespace prism {

std::string sbatch_header(const SlurmSettings& s, const std::string& job_name, const std::string& output,
                          int cpus) {
  std::string h = "#!/bin/bash\n";
  h += fmt::format("#SBATCH --job-name={}\n", job_name);
  h += fmt::format("#SBATCH --output={}\n", output);
  h += fmt::format("#SBATCH --chdir={}\n", fs::current_path().string());
  h += fmt::format("#SBATCH --cpus-per-task={}\n", cpus);
  h += "#SBATCH --ntasks=1\n";
  if (!s.partition.empty()) h += fmt::format("#SBATCH --partition={}\n", s.partition);
  if (!s.time.empty()) h += fmt::format("#SBATCH --time={}\n", s.time);
  if (!s.mem.empty()) h += fmt::format("#SBATCH --mem={}\n", s.mem);
  if (!s.account.empty()) h += fmt::format("#SBATCH --account={}\n", s.account);
  for (const auto& e : s.extra) h += fmt::format("#SBATCH {}\n", e);
  return h;
}

std::string collect_header(const SlurmSettings& s, const std::string& job_name, const std::string& output) {
  SlurmSettings c;
  c.partition = s.collect.partition;
  c.time = s.collect.time;
  c.mem = s.collect.mem;
  c.account = s.account;
  c.extra = s.collect.extra;
  return sbatch_header(c, job_name, output, s.collect.cpus);
}

ArrayJobs submit_array_then_collect(const std::string& array_script, const std::string& collect_script) {
  auto job_id = [](std::string parsable) { return parsable.substr(0, parsable.find(';')); };  // "id;cluster"
  ArrayJobs j;
  j.array = job_id(run_command("sbatch --parsable " + shell_quote(array_script), "sbatch"));
  j.collect = job_id(run_command(
      fmt::format("sbatch --parsable --dependency=afterany:{} {}", j.array, shell_quote(collect_script)),
      "sbatch (collection job)"));
  return j;
}

std::string requeue_lines(const SlurmSettings& s) {
  if (s.signal_seconds <= 0) return "";
  // SIGUSR1 to this script's process (B:), which passes it to the trial; the task requeues itself after the
  // trial's checkpoint, and its output goes on in the same file.
  return fmt::format("#SBATCH --signal=B:USR1@{}\n#SBATCH --requeue\n#SBATCH --open-mode=append\n", s.signal_seconds);
}

std::string array_spec(const std::vector<int>& indices) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(indices[i]) : fmt::format("{}-{}", indices[i], indices[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

int requeue_after_warning(const SlurmSettings& s, int signal) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || signal != SIGUSR1 || s.signal_seconds <= 0) return 130;  // not Slurm's warning: the next wave resumes it
  const char* restarts_env = std::getenv("SLURM_RESTART_COUNT");
  const int restarts = restarts_env ? std::atoi(restarts_env) : 0;
  if (restarts >= s.max_requeues) {
    std::cout << fmt::format("prism sweep: this task was requeued {} times (sweep.slurm.max_requeues); the next wave "
                             "resumes the trial from its checkpoint\n",
                             restarts)
              << std::flush;
    return 130;
  }
  const char* array_job = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  const std::string id = array_job && task ? fmt::format("{}_{}", array_job, task) : std::string(job);
  std::cout << fmt::format("prism sweep: SIGUSR1 before the time limit: the trial checkpointed; requeueing job {} "
                           "(restart {})\n",
                           id, restarts + 1)
            << std::flush;
  run_command("scontrol requeue " + id, "scontrol requeue");
  return 0;
}

}  // namespace prism
