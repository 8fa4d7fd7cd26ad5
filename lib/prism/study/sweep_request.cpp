#include "prism/study/sweep_request.h"

#include <fmt/format.h>

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "prism/config/compose.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/post/post_run.h"
#include "prism/sweep/dry_run.h"
#include "prism/sweep/halving.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/slurm.h"
#include "prism/sweep/sweep.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

void say(const std::function<void(const std::string&)>& to, const std::string& text) {
  if (to) to(text);
}

// The plan and its directory: a sweep directory as recorded in its sweep.yaml, or a sweep file planned afresh.
std::pair<SweepPlan, std::string> plan_request(const SweepRequest& r, bool is_dir) {
  if (!is_dir) {
    SweepPlan plan = plan_sweep(r.target, r.overrides);
    std::string dir = !r.out.empty() ? r.out : (fs::path("sweeps") / plan.settings.name).string();
    return {std::move(plan), dir};
  }
  if (!r.overrides.empty())
    throw Error("overrides apply to a sweep file; a sweep directory's trials are fixed", r.target,
                "rerun the sweep file with the overrides (and --force to reuse this directory)");
  if (!r.out.empty()) throw Error("--out with a sweep directory", r.target, "drop --out: the directory is the output");
  const std::string yaml = (fs::path(r.target) / "sweep.yaml").string();
  if (!fs::exists(yaml))
    throw Error("the directory holds no sweep.yaml", r.target, "pass a sweep file, or a directory prism sweep made");
  return {plan_from_yaml(yaml), r.target};
}

RetryPolicy retry_policy(const SweepRequest& r) {
  if (r.retry_failed && r.no_retry)
    throw Error("--retry-failed and --no-retry contradict each other", "command line", "pass one of them");
  return r.retry_failed ? RetryPolicy::All : r.no_retry ? RetryPolicy::None : RetryPolicy::Untrained;
}

int collect(const SweepRequest& r, const SweepPlan& plan, const std::string& dir, bool is_dir) {
  if (!fs::exists(fs::path(dir) / "sweep.yaml"))
    throw Error("nothing to collect: no sweep.yaml", dir, "run the sweep first");
  if (!is_dir && plan_from_yaml((fs::path(dir) / "sweep.yaml").string()).definition() != plan.definition())
    throw Error("the sweep directory was made by a different sweep", dir,
                "collect it by its directory (prism sweep DIR --collect)");
  auto s = collect_sweep(plan, dir);
  say(r.print, s.table + describe_halving(plan, s));
  return 0;
}

int run_on_slurm(const SweepRequest& r, const SweepPlan& plan, const std::string& dir, int jobs, int threads,
                 RetryPolicy retry) {
  SlurmOptions so;
  so.dir = dir;
  so.threads = threads_per_trial(threads, jobs);
  so.retry = retry;
  so.force = r.force;
  so.submit = r.submit;
  auto sub = submit_to_slurm(plan, so);
  if (!sub.finished) return 0;
  say(r.print, "\n" + sub.summary.table + describe_halving(plan, sub.summary));
  say(r.print, fmt::format("index: {}/summary.csv, {}/sweep.h5\n", dir, dir));
  return sub.summary.exit_code;
}

int run_here(const SweepRequest& r, const SweepPlan& plan, const std::string& dir, int jobs, int threads,
             RetryPolicy retry) {
  if (const std::string w = sweep_bf16_warning(plan, jobs, threads); !w.empty()) say(r.note, w);
  SweepOptions so;
  so.dir = dir;
  so.jobs = jobs;
  so.threads = threads;
  if (r.timeout_s) so.timeout_s = *r.timeout_s;
  so.retry = retry;
  so.force = r.force;
  auto s = run_sweep(plan, so);
  say(r.print, "\n" + s.table + describe_halving(plan, s));
  say(r.print, fmt::format("index: {}/summary.csv, {}/sweep.h5\n", dir, dir));
  if (s.exit_code == 130) say(r.note, fmt::format("prism sweep: stopped; rerun to continue: prism sweep {}\n", dir));
  if (s.exit_code == 1)
    say(r.note, fmt::format("prism sweep: some trials failed (see above). Once the cause is fixed, rerunning the same "
                            "command retries those that failed before training; prism sweep {} --retry-failed reruns "
                            "every failed trial\n", dir));
  return s.exit_code;
}

int run_post(const SweepRequest& r) {
  if (!fs::is_directory(r.target))
    throw Error("--post post-processes a sweep directory", r.target,
                "run the sweep first, then pass its directory: prism sweep sweeps/NAME --post POST.yaml");
  if (r.dry_run || r.print_config || !r.out.empty() || r.rung != 0)
    throw Error("--dry-run, --print-config, --out and --rung do not apply to --post", "command line",
                "drop them; the sweep directory is the output");
  if (r.retry_failed && r.no_retry)
    throw Error("--retry-failed and --no-retry contradict each other", "command line", "pass one of them");
  PostRequest p;
  p.dir = r.target;
  p.post_file = r.post;
  p.overrides = r.overrides;
  p.task_index = r.task_index;
  p.collect = r.collect;
  p.launcher = r.launcher;
  p.submit = r.submit;
  p.jobs = r.jobs;
  p.threads = r.threads;
  p.timeout_s = r.timeout_s ? *r.timeout_s : 0;
  p.retry_failed = !r.no_retry;
  p.gpt2_vocab = r.gpt2_vocab;
  p.print = r.print;
  p.note = r.note;
  return run_post_request(p);
}

}  // namespace

int run_sweep_request(const SweepRequest& r) {
  if (r.target.empty())
    throw Error("no sweep file given", "prism sweep",
                "pass a sweep file, e.g. prism sweep experiments/sweeps/cpu-schedules.yaml --dry-run");
  if (!r.post.empty()) return run_post(r);
  if (r.launcher != "local" && r.launcher != "slurm")
    throw Error(fmt::format("unknown launcher '{}'", r.launcher), "--launcher", "use local or slurm");
  const bool is_dir = fs::is_directory(r.target);
  if (r.print_config) {
    if (is_dir) throw Error("--print-config needs a sweep file", r.target, "pass the sweep file, not its directory");
    // The base config as every command resolves it (print_config), then the sweep section.
    const Config base = compose_run_config(r.target, r.overrides, SweepSection::Drop);
    YAML::Node sweep;
    sweep["sweep"] = compose_config(r.target, r.overrides).root["sweep"];
    say(r.print, print_config(base) + YAML::Dump(sweep) + "\n");
    return 0;
  }
  const auto [plan, dir] = plan_request(r, is_dir);
  const int jobs = r.jobs ? *r.jobs : plan.settings.jobs;
  const int threads = r.threads ? *r.threads : plan.settings.threads;
  if (jobs < 1) throw Error("--jobs must be at least 1", "--jobs", "pass --jobs 1 or more");
  if (threads < 0) throw Error("--threads must not be negative", "--threads", "pass 0 (every core) or more");
  const RetryPolicy retry = retry_policy(r);
  if (!r.pilot.empty() && !r.dry_run)
    throw Error("--pilot plans the seeds of a dry run", "--pilot", "add --dry-run, or drop --pilot");
  if (r.dry_run) {
    say(r.print, format_dry_run(plan, dir, jobs, threads));
    double eta_s = 0;
    say(r.print, format_measured_eta(plan, jobs, threads, &eta_s));
    say(r.print, format_power_plan(plan, r.pilot, eta_s));
    return 0;
  }
  if (r.task_index) {
    if (!is_dir) throw Error("--task-index runs a trial of a sweep directory", r.target, "pass the sweep directory");
    return run_slurm_task(plan, dir, *r.task_index, r.rung, "", retry);
  }
  if (r.collect) return collect(r, plan, dir, is_dir);
  if (r.launcher == "slurm") return run_on_slurm(r, plan, dir, jobs, threads, retry);
  return run_here(r, plan, dir, jobs, threads, retry);
}

}  // namespace prism
