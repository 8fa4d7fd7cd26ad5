// prism sweep SWEEP.yaml [key=value ...] | prism sweep SWEEP_DIR: grid searches.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <iostream>

#include "cli.h"
#include "prism/config/compose.h"
#include "prism/config/config.h"
#include "prism/model/cost.h"
#include "prism/error.h"
#include "prism/sweep/halving.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/slurm.h"
#include "prism/sweep/sweep.h"

namespace fs = std::filesystem;

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
    "examples:\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml --dry-run\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml --jobs 2 sweep.grid.train.seed=[0,1,2]\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml sweep.halving.enabled=true --out sweeps/cpu-sha\n"
    "  prism sweep sweeps/cpu-schedules --collect\n"
    "  prism sweep experiments/sweeps/cpu-schedules.yaml --launcher slurm";

std::string first_model_line(const SweepPlan& plan) {
  if (plan.trials.empty()) return "";
  const Trial& t = plan.trials[0];
  YAML::Node c = YAML::Load(t.config);
  const YAML::Node m = c["model"];
  return fmt::format("model {}: {} layers x {}, baseline {} heads; {} steps x {} tokens per trial",
                     m["preset"] ? m["preset"].as<std::string>() : std::string("custom"), m["n_layer"].as<int>(),
                     m["d_model"].as<int>(), m["n_head"].as<int>(), t.max_steps, t.step_tokens);
}

// Training FLOPs per token of a trial (cost model: 3x forward at the trial's context).
double trial_flops_per_token(const Trial& t) {
  const Config c = parse_config(YAML::Load(t.config), t.name);
  const int64_t context = c.train.seq_len > 0 ? c.train.seq_len : c.model.block_size;
  return model_cost(c.model, t.schedule, static_cast<int>(context)).train_flops_per_token;
}

// Tokens/s one device trains the trial at: as stated, or from peak FLOP/s x MFU.
double trial_tokens_per_s(const EstimateSettings& e, double flops_per_token) {
  if (e.tokens_per_s > 0) return e.tokens_per_s;
  return e.peak_flops * e.mfu / flops_per_token;
}

void print_dry_run(const SweepPlan& plan, const std::string& out, int jobs, int threads) {
  std::cout << fmt::format("sweep {} ({}): {} trial{}, axes: {}\n", plan.settings.name, plan.source,
                           plan.trials.size(), plan.trials.size() == 1 ? "" : "s", fmt::join(plan.axes, " x "));
  std::cout << first_model_line(plan) << "\n";
  const EstimateSettings& est = plan.settings.estimate;
  const bool hours = est.tokens_per_s > 0 || est.peak_flops > 0;
  size_t w = 4;
  for (const auto& t : plan.trials) w = std::max(w, t.name.size());
  std::cout << fmt::format("  {:>5}  {:<{}}  {:<16}  {:>4}  {:>10}  {}{}\n", "index", "name", w, "schedule", "seed",
                           "train FLOP", hours ? "device-h  " : "", "heads");
  int64_t tokens = 0;
  double flops = 0, device_h = 0;
  for (const auto& t : plan.trials) {
    const int64_t n = t.max_steps * t.step_tokens;
    const double fpt = trial_flops_per_token(t), f = fpt * static_cast<double>(n);
    const double h = hours ? static_cast<double>(n) / trial_tokens_per_s(est, fpt) / 3600.0 : 0;
    std::cout << fmt::format("  {:>5}  {:<{}}  {:<16}  {:>4}  {:>10.3e}  {}{}\n", t.index, t.name, w,
                             schedule_label(t), t.seed, f, hours ? fmt::format("{:>8.1f}  ", h) : "",
                             t.schedule.list());
    tokens += n;
    flops += f;
    device_h += h;
  }
  std::cout << fmt::format("full grid: {} runs, {} training tokens, {:.3e} training FLOPs (model FLOPs, 3x forward)\n",
                           plan.trials.size(), tokens, flops);
  if (hours) {
    const std::string rate =
        est.tokens_per_s > 0
            ? fmt::format("{:.3g} tokens/s per trial", est.tokens_per_s)
            : fmt::format("{:.0f}% of {:.3g} FLOP/s ({:.3g} tokens/s for trial 0)", 100 * est.mfu, est.peak_flops,
                          plan.trials.empty() ? 0.0 : trial_tokens_per_s(est, trial_flops_per_token(plan.trials[0])));
    std::cout << fmt::format("device-hours at {} on {} ({}): {:.1f} in all\n", rate,
                             est.device.empty() ? "one device" : est.device,
                             est.source.empty() ? "throughput as stated in the sweep file" : est.source, device_h);
  }
  if (plan.settings.halving.enabled && !plan.trials.empty()) {
    const auto b = rung_budgets(plan.trials[0].max_steps, plan.settings.halving);
    std::cout << fmt::format("successive halving (eta {}): rungs at {} steps; the best 1/{} of the configurations "
                             "(seeds pooled) move up each rung{}\n",
                             plan.settings.halving.eta, fmt::join(b, ", "), plan.settings.halving.eta,
                             plan.settings.halving.keep_baseline ? ", the baseline always" : "");
  }
  std::cout << fmt::format("would run in {}: {} at a time, {} thread{} each; nothing was run\n", out, jobs,
                           threads_per_trial(threads, jobs), threads_per_trial(threads, jobs) == 1 ? "" : "s");
}

int run(const std::vector<std::string>& args) {
  return guarded("sweep", [&]() -> int {
    po::options_description opts("Options");
    opts.add_options()
        ("sweep", po::value<std::string>(), "sweep file, or an existing sweep directory")
        ("set", po::value<std::vector<std::string>>()->composing(), "key=value overrides (positional)")
        ("out,o", po::value<std::string>(), "sweep directory (default: sweeps/<sweep name>)")
        ("dry-run", po::bool_switch(), "print the trials (count, names, schedules) and exit; runs nothing")
        ("print-config", po::bool_switch(), "print the composed sweep file (defaults, overrides, ${...} resolved) and exit")
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
        ("rung", po::value<int>()->default_value(0), "with --task-index: the halving rung to run");
    po::positional_options_description pos;
    pos.add("sweep", 1).add("set", -1);
    po::variables_map vm;
    if (!parse("sweep", kUsage, opts, pos, args, vm)) return 0;
    if (!vm.count("sweep"))
      throw Error("no sweep file given", "prism sweep",
                  "pass a sweep file, e.g. prism sweep experiments/sweeps/cpu-schedules.yaml --dry-run");
    const std::string target = vm["sweep"].as<std::string>();
    std::vector<std::string> overrides;
    if (vm.count("set")) overrides = vm["set"].as<std::vector<std::string>>();
    const std::string launcher = vm["launcher"].as<std::string>();
    if (launcher != "local" && launcher != "slurm")
      throw Error(fmt::format("unknown launcher '{}'", launcher), "--launcher", "use local or slurm");

    // A directory: the sweep recorded in its sweep.yaml, as it was planned.
    const bool is_dir = fs::is_directory(target);
    if (vm["print-config"].as<bool>()) {
      if (is_dir) throw Error("--print-config needs a sweep file", target, "pass the sweep file, not its directory");
      std::cout << YAML::Dump(compose_config(target, overrides).root) << "\n";
      return 0;
    }
    SweepPlan plan;
    std::string dir;
    if (is_dir) {
      if (!overrides.empty())
        throw Error("overrides apply to a sweep file; a sweep directory's trials are fixed", target,
                    "rerun the sweep file with the overrides (and --force to reuse this directory)");
      if (vm.count("out")) throw Error("--out with a sweep directory", target, "drop --out: the directory is the output");
      const std::string yaml = (fs::path(target) / "sweep.yaml").string();
      if (!fs::exists(yaml))
        throw Error("the directory holds no sweep.yaml", target, "pass a sweep file, or a directory prism sweep made");
      plan = plan_from_yaml(yaml);
      dir = target;
    } else {
      plan = plan_sweep(target, overrides);
      dir = vm.count("out") ? vm["out"].as<std::string>() : (fs::path("sweeps") / plan.settings.name).string();
    }
    const int jobs = vm.count("jobs") ? vm["jobs"].as<int>() : plan.settings.jobs;
    const int threads = vm.count("threads") ? vm["threads"].as<int>() : plan.settings.threads;
    if (jobs < 1) throw Error("--jobs must be at least 1", "--jobs", "pass --jobs 1 or more");
    if (threads < 0) throw Error("--threads must not be negative", "--threads", "pass 0 (every core) or more");

    if (vm["retry-failed"].as<bool>() && vm["no-retry"].as<bool>())
      throw Error("--retry-failed and --no-retry contradict each other", "command line", "pass one of them");
    const RetryPolicy retry = vm["retry-failed"].as<bool>() ? RetryPolicy::All
                              : vm["no-retry"].as<bool>()   ? RetryPolicy::None
                                                            : RetryPolicy::Untrained;
    if (vm["dry-run"].as<bool>()) {
      print_dry_run(plan, dir, jobs, threads);
      return 0;
    }
    if (vm.count("task-index")) {
      if (!is_dir) throw Error("--task-index runs a trial of a sweep directory", target, "pass the sweep directory");
      return run_slurm_task(plan, dir, vm["task-index"].as<int>(), vm["rung"].as<int>(), "", retry);
    }
    if (vm["collect"].as<bool>()) {
      if (!fs::exists(fs::path(dir) / "sweep.yaml"))
        throw Error("nothing to collect: no sweep.yaml", dir, "run the sweep first");
      if (!is_dir && plan_from_yaml((fs::path(dir) / "sweep.yaml").string()).definition() != plan.definition())
        throw Error("the sweep directory was made by a different sweep", dir,
                    "collect it by its directory (prism sweep DIR --collect)");
      auto s = collect_sweep(plan, dir);
      std::cout << s.table << describe_halving(plan, s);
      return 0;
    }
    if (launcher == "slurm") {
      SlurmOptions so;
      so.dir = dir;
      so.threads = threads_per_trial(threads, jobs);
      so.retry = retry;
      so.force = vm["force"].as<bool>();
      so.submit = !vm["no-submit"].as<bool>();
      auto sub = submit_to_slurm(plan, so);
      if (sub.finished) {
        std::cout << "\n" << sub.summary.table << describe_halving(plan, sub.summary);
        std::cout << fmt::format("index: {}/summary.csv, {}/sweep.h5\n", dir, dir);
        return sub.summary.exit_code;
      }
      return 0;
    }
    SweepOptions so;
    so.dir = dir;
    so.jobs = jobs;
    so.threads = threads;
    if (vm.count("timeout")) so.timeout_s = vm["timeout"].as<double>();
    so.retry = retry;
    so.force = vm["force"].as<bool>();
    auto s = run_sweep(plan, so);
    std::cout << "\n" << s.table << describe_halving(plan, s);
    std::cout << fmt::format("index: {}/summary.csv, {}/sweep.h5\n", dir, dir);
    if (s.exit_code == 130) std::cerr << fmt::format("prism sweep: stopped; rerun to continue: prism sweep {}\n", dir);
    if (s.exit_code == 1)
      std::cerr << fmt::format("prism sweep: some trials failed (see above). Once the cause is fixed, rerunning the same "
                               "command retries those that failed before training; prism sweep {} --retry-failed reruns "
                               "every failed trial\n", dir);
    return s.exit_code;
  });
}

const Registration reg{{20, "sweep", "run a grid search over head schedules (and any config keys)", run}};

}  // namespace
}  // namespace prism::cli
