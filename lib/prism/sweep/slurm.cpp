#include "prism/sweep/slurm.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/sweep/local_launcher.h"
#include "prism/sweep/sweep_dir.h"

namespace fs = std::filesystem;

namespace prism {

namespace {
std::string abs_path(const std::string& p) { return fs::absolute(p).lexically_normal().string(); }
}  // namespace

namespace {
int next_wave(const std::string& slurm_dir) {
  int wave = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(slurm_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("wave-", 0) == 0 && e.path().extension() == ".sh" && n.find("collect") == std::string::npos)
      wave = std::max(wave, std::atoi(n.c_str() + 5) + 1);
  }
  return wave;
}
}  // namespace

// The command-line spelling of a retry policy (the default, Untrained, has none).
std::string retry_flag(RetryPolicy r) {
  return r == RetryPolicy::All ? " --retry-failed" : r == RetryPolicy::None ? " --no-retry" : "";
}

SlurmSubmission submit_to_slurm(const SweepPlan& plan, const SlurmOptions& o) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
    else std::cout << s << std::endl;
  };
  const std::string dir = abs_path(o.dir);
  fs::create_directories(dir);
  SweepLock lock = SweepLock::acquire((fs::path(dir) / "sweep.lock").string(), SweepLock::Mode::Exclusive, 0,
                                      "submitting the sweep to Slurm");
  const std::string change = prepare_sweep_dir(dir, plan, o.force, /*allow_growth=*/false).message();
  if (!change.empty()) log(change);

  SlurmSubmission sub;
  sub.summary = collect_sweep(plan, dir);
  const SweepStage stage = sweep_stage(plan, dir, o.retry);
  if (stage.finished) {
    sub.finished = true;
    return sub;
  }
  const std::string slurm_dir = (fs::path(dir) / "slurm").string();
  fs::create_directories(slurm_dir);
  const int wave = next_wave(slurm_dir);
  if (wave >= plan.settings.slurm.max_waves)
    throw Error(fmt::format("{} waves were submitted and runs still need work ({} at rung {})", wave,
                            stage.work.size(), stage.rung),
                slurm_dir,
                "look at the task logs there (a time limit too short to reach a checkpoint repeats forever); "
                "raise sweep.slurm.time or sweep.slurm.max_waves, then run prism sweep DIR --launcher slurm");
  for (const Trial* t : stage.work) sub.indices.push_back(t->index);
  sub.rung = stage.rung;
  const int cpus = plan.settings.slurm.cpus_per_task > 0 ? plan.settings.slurm.cpus_per_task : std::max(1, o.threads);
  const std::string prism = abs_path(o.prism.empty() ? self_executable() : o.prism);

  std::string array = sbatch_header(plan.settings.slurm, fmt::format("prism-{}-w{}", plan.settings.name, wave),
                                    fmt::format("{}/wave-{}-%a.out", slurm_dir, wave), cpus);
  std::string spec = array_spec(sub.indices);
  if (plan.settings.slurm.max_parallel > 0) spec += fmt::format("%{}", plan.settings.slurm.max_parallel);
  array += fmt::format("#SBATCH --array={}\n", spec);
  array += requeue_lines(plan.settings.slurm);
  array += fmt::format(
      "# prism sweep {}: wave {}, rung {} ({} runs). One task per trial; the task index is the trial's index in\n"
      "# sweep.yaml. Written by `prism sweep --launcher slurm`; rerunning that command writes the next wave.\n",
      plan.settings.name, wave, stage.rung, sub.indices.size());
  array += fmt::format("exec {} sweep {} --task-index \"$SLURM_ARRAY_TASK_ID\" --rung {}{}\n", shell_quote(prism),
                       shell_quote(dir), stage.rung, retry_flag(o.retry));
  sub.array_script = fmt::format("{}/wave-{}.sh", slurm_dir, wave);
  write_script(sub.array_script, array);

  std::string collect = collect_header(plan.settings.slurm, fmt::format("prism-{}-w{}-collect", plan.settings.name, wave),
                                       fmt::format("{}/wave-{}-collect.out", slurm_dir, wave));
  collect += fmt::format(
      "# Collects wave {} of sweep {} once its array has ended: rebuilds the index, submits the next wave while\n"
      "# work remains, and prints the ranked table at the end.\n",
      wave, plan.settings.name);
  // The next wave retries nothing: this wave already gave each failed run its one more attempt.
  collect += fmt::format("exec {} sweep {} --launcher slurm --no-retry\n", shell_quote(prism), shell_quote(dir));
  sub.collect_script = fmt::format("{}/wave-{}-collect.sh", slurm_dir, wave);
  write_script(sub.collect_script, collect);

  if (!o.submit) {
    log(fmt::format("wrote {} (array {}) and {}; submit with:\n  jobid=$(sbatch --parsable {})\n  sbatch "
                    "--dependency=afterany:$jobid {}",
                    sub.array_script, spec, sub.collect_script, sub.array_script, sub.collect_script));
    return sub;
  }
  const ArrayJobs jobs = submit_array_then_collect(sub.array_script, sub.collect_script);
  sub.array_job = jobs.array;
  sub.collect_job = jobs.collect;
  log(fmt::format("submitted wave {}: array job {} ({} task{}, rung {}), collection job {}; outputs in {}", wave,
                  sub.array_job, sub.indices.size(), sub.indices.size() == 1 ? "" : "s", stage.rung, sub.collect_job,
                  slurm_dir));
  return sub;
}

int run_slurm_task(const SweepPlan& plan, const std::string& dir, int index, int rung, const std::string& prism,
                   RetryPolicy retry) {
  if (index < 0 || index >= static_cast<int>(plan.trials.size()))
    throw Error(fmt::format("task index {} is not a trial of sweep {} (0..{})", index, plan.settings.name,
                            plan.trials.size() - 1),
                dir + "/sweep.yaml", "pass the trial's index from sweep.yaml (prism sweep DIR --dry-run lists them)");
  const bool halving = plan.settings.halving.enabled;
  std::vector<int64_t> budgets{plan.trials[static_cast<size_t>(index)].max_steps};
  if (halving) budgets = rung_budgets(plan.trials[0].max_steps, plan.settings.halving);
  if (rung < 0 || rung >= static_cast<int>(budgets.size()))
    throw Error(fmt::format("rung {} does not exist (the sweep has {})", rung, budgets.size()), dir, "pass --rung 0..");
  // Shared: tasks run side by side, but never next to a local runner or a submission.
  SweepLock lock = SweepLock::acquire((fs::path(dir) / "sweep.lock").string(), SweepLock::Mode::Shared, 120,
                                      "running a Slurm task");
  const Trial& t = plan.trials[static_cast<size_t>(index)];
  SweepStage one;
  one.rung = rung;
  one.steps = budgets[static_cast<size_t>(rung)];
  one.trials = {&t};
  LaunchOptions lo;
  lo.prism = prism;
  lo.jobs = 1;
  const char* cpus = std::getenv("SLURM_CPUS_PER_TASK");
  lo.threads = cpus ? std::max(1, std::atoi(cpus)) : threads_per_trial(plan.settings.threads, 1);
  lo.timeout_s = plan.settings.timeout_s;
  lo.retry = retry;
  lo.own_process_group = false;  // Slurm signals the task's process group: the trainer gets it once
  const auto report = launch_local(stage_runs(plan, dir, one, false), lo);
  if (report.failed > 0) return 1;
  // Only a trial that stopped short is requeued: one that completed as the warning came needs nothing more.
  if (report.interrupted > 0) return requeue_after_warning(plan.settings.slurm, report.signal);
  if (report.stopped) return 130;
  return 0;
}

}  // namespace prism
