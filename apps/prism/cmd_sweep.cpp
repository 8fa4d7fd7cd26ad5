// prism sweep SWEEP.yaml [key=value ...] | prism sweep SWEEP_DIR: grid searches.
#include <iostream>

#include "cli.h"
#include "prism/study/sweep_request.h"
#include "trained_model_options.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "SWEEP.yaml [key=value ...] [options]   run a grid search\n"
    "       prism sweep SWEEP_DIR [options]               continue, collect or inspect a sweep directory\n\n"
    "A sweep file is a config (defaults:, keys, ${...}) with a `sweep:` section naming the\n"
    "search space: lists over any keys (train.seed: [0, 1]), config group options\n"
    "(model: [cpu-128, cpu-192]), explicit schedules (schedule.heads: [...]) and\n"
    "generated ones (schedule.enumerate: {head_dims: [64], block: [2, 3]}); the uniform\n"
    "baseline is always added unless sweep.baseline is false. Every trial is checked\n"
    "before anything runs. See experiments/sweeps/ for examples.\n\n"
    "Trials run as `prism train` child processes, --jobs at a time, the threads divided\n"
    "among them. Rerunning the same command resumes: completed trials are skipped,\n"
    "interrupted ones continue from their checkpoints, a trial that failed before it\n"
    "trained a step (data not prepared yet, a missing file) is tried again, and one that\n"
    "failed while training (diverged, crashed, timed out) is rerun only with\n"
    "--retry-failed. A failing trial never stops the others. Output (--out, default\n"
    "sweeps/<name>): sweep.yaml, one folder per trial (run.h5, checkpoints, train.log),\n"
    "summary.csv, sweep.h5, ranking.txt, and the ranked table printed at the end.\n\n"
    "Post-processing (--post POST.yaml, after training): every trial that completed its\n"
    "full budget gets its held-out attention distance, Delta D_l against the uniform\n"
    "trial of the same seed, and the zero-shot tasks the post file names, each trial\n"
    "a child process (--jobs at a time) or a Slurm array task (--launcher slurm).\n"
    "Resumable: a rerun skips the steps done with the same inputs; a failing step is\n"
    "recorded (post.json per trial, post.csv) and the others go on. key=value\n"
    "overrides apply to the post file (task_dir=/scratch/tasks).\n"
    "Post file keys (experiments/study/post/paper.yaml is the paper's):\n"
    "  task_dir        the task files' folder\n"
    "  tasks           {hellaswag|piqa|arc_easy|winogrande: {data: FILE, labels: FILE}}\n"
    "  eval            {limit: items per task (0: all), batch_tokens: padded tokens per pass}\n"
    "  distance        {data, tokens, batch, bins, seq_len}, or false for none\n"
    "  device          auto | cpu | cuda (cuda on Slurm needs a GPU in slurm.extra)\n"
    "  backend         the attention back end (auto)\n"
    "  threads         per trial process (0: the cores divided by --jobs)\n"
    "  slurm           keys that replace the sweep's sweep.slurm for these jobs\n\n"
    "Slurm (sweep.slurm in the sweep file): partition, time, mem, account,\n"
    "cpus_per_task, max_parallel, max_waves, extra (#SBATCH lines: --gres=gpu:1);\n"
    "signal_seconds (120: SIGUSR1 that long before the time limit; the trial\n"
    "checkpoints and its task requeues itself; 0: off) and max_requeues (50);\n"
    "collect: {partition, time, mem, cpus, extra} for the bookkeeping jobs, which\n"
    "never get the trials' partition or extra lines.\n\n"
    "examples:\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml --dry-run\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml --jobs 2 sweep.grid.train.seed=[0,1,2]\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml sweep.halving.enabled=true --out sweeps/cpu-sha\n"
    "  prism sweep sweeps/cpu-schedules --collect\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml --launcher slurm\n"
    "  prism sweep sweeps/study-124m --post experiments/study/post/paper.yaml task_dir=/scratch/tasks --launcher slurm";

int run(const std::vector<std::string>& args) {
  return guarded("sweep", [&]() -> int {
    po::options_description opts("Options");
    opts.add_options()
        ("sweep", po::value<std::string>(), "sweep file, or an existing sweep directory")
        ("set", po::value<std::vector<std::string>>()->composing(), "key=value overrides (positional)")
        ("out,o", po::value<std::string>(), "sweep directory (default: sweeps/<sweep name>)")
        ("pilot", po::value<std::string>(),
         "with --dry-run: a finished sweep of the same setting whose Prism - uniform sd (paired by seed) plans the "
         "seeds: the detectable effect of this grid's seeds and the seeds the target effect needs, with their cost")
        ("dry-run", po::bool_switch(),
         "print the trials (count, names, schedules, FLOPs) and the ETA here, from one training step of each "
         "setup timed on this machine, and exit; trains nothing")
        ("print-config", po::bool_switch(), "print the resolved base config (as prism train and schedule resolve it) and the sweep section, and exit")
        ("jobs,j", po::value<int>(), "trials at once on this machine (default: sweep.jobs, else 1)")
        ("threads", po::value<int>(), "threads shared by the concurrent trials (default: sweep.threads, else every core)")
        ("timeout", po::value<double>(), "seconds per trial run before it is stopped and marked failed (0: none)")
        ("retry-failed", po::bool_switch(), "rerun every failed trial (from its checkpoint when it has one)")
        ("no-retry", po::bool_switch(), "rerun no failed trial, not even those that failed before training")
        ("force", po::bool_switch(), "take over a sweep directory made by a different sweep (nothing is deleted)")
        ("collect", po::bool_switch(), "rebuild the index (summary.csv, sweep.h5) and print the table; run nothing")
        ("launcher", po::value<std::string>()->default_value("local"), "local | slurm")
        ("no-submit", po::bool_switch(), "with --launcher slurm: write the job scripts, do not submit them")
        ("task-index", po::value<int>(), "run one trial (a Slurm array task): its index in sweep.yaml")
        ("rung", po::value<int>()->default_value(0), "with --task-index: the halving rung to run")
        ("post", po::value<std::string>(), "post-process the sweep directory with this post file (distance, tasks)");
    po::positional_options_description pos;
    pos.add("sweep", 1).add("set", -1);
    po::variables_map vm;
    if (!parse("sweep", kUsage, opts, pos, args, vm)) return 0;
    SweepRequest r;
    if (vm.count("sweep")) r.target = vm["sweep"].as<std::string>();
    if (vm.count("set")) r.overrides = vm["set"].as<std::vector<std::string>>();
    if (vm.count("out")) r.out = vm["out"].as<std::string>();
    if (vm.count("jobs")) r.jobs = vm["jobs"].as<int>();
    if (vm.count("threads")) r.threads = vm["threads"].as<int>();
    if (vm.count("timeout")) r.timeout_s = vm["timeout"].as<double>();
    r.retry_failed = vm["retry-failed"].as<bool>();
    r.no_retry = vm["no-retry"].as<bool>();
    r.force = vm["force"].as<bool>();
    r.print_config = vm["print-config"].as<bool>();
    r.dry_run = vm["dry-run"].as<bool>();
    if (vm.count("pilot")) r.pilot = vm["pilot"].as<std::string>();
    r.collect = vm["collect"].as<bool>();
    if (vm.count("task-index")) r.task_index = vm["task-index"].as<int>();
    r.rung = vm["rung"].as<int>();
    r.launcher = vm["launcher"].as<std::string>();
    r.submit = !vm["no-submit"].as<bool>();
    if (vm.count("post")) r.post = vm["post"].as<std::string>();
    r.gpt2_vocab = vocab_path();
    r.print = [](const std::string& s) { std::cout << s; };
    r.note = [](const std::string& s) { std::cerr << s; };
    return run_sweep_request(r);
  });
}

const Registration reg{{20, "sweep", "run a grid search over head schedules (and any config keys)", run}};

}  // namespace
}  // namespace prism::cli
