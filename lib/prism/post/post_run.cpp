#include "prism/post/post_run.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/launch/pool.h"
#include "prism/launch/process.h"
#include "prism/model/placement.h"
#include "prism/post/post_settings.h"
#include "prism/post/post_trial.h"
#include "prism/sweep/local_launcher.h"
#include "prism/sweep/plan.h"
#include "prism/launch/slurm.h"
#include "prism/sweep/sweep.h"
#include "prism/sweep/sweep_dir.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

void say(const std::function<void(const std::string&)>& to, const std::string& text) {
  if (to) to(text);
}

struct Setup {
  SweepPlan plan;
  PostSettings settings;
  std::string post_yaml;  // <dir>/post.yaml: what trial processes and tasks read
};

Setup setup(const PostRequest& r) {
  const fs::path yaml = fs::path(r.dir) / "sweep.yaml";
  if (!fs::exists(yaml))
    throw Error("not a sweep directory (no sweep.yaml)", r.dir,
                "pass the directory prism sweep made, e.g. prism sweep sweeps/study-124m --post POST.yaml");
  Setup s{plan_from_yaml(yaml.string()), load_post_settings(r.post_file, r.overrides),
          (fs::path(r.dir) / "post.yaml").string()};
  check_post_files(s.settings);
  // Where steps run here (a local pool, or this Slurm task), device cuda without a GPU fails now, up front. A
  // submission from a login node, or a collection, runs no step here: the jobs' GPU request is checked instead.
  const bool runs_steps_here = r.task_index || (r.launcher != "slurm" && !r.collect);
  if (runs_steps_here) resolve_placement(s.settings.device, s.settings.backend);
  return s;
}

// Trials in plan order with their state: not completed / pending steps / done.
struct TrialWork {
  const Trial* trial;
  bool ready;                       // completed at the full budget
  std::vector<std::string> pending;
};

std::vector<TrialWork> survey(const Setup& s, const std::string& dir, bool retry_failed) {
  std::vector<TrialWork> out;
  for (const auto& t : s.plan.trials) {
    const bool ready = final_run_completed(s.plan, dir, t);
    out.push_back({&t, ready, ready ? pending_post_steps(s.settings, s.plan, dir, t, retry_failed)
                                    : std::vector<std::string>{}});
  }
  return out;
}

int threads_each(const PostRequest& r, const Setup& s, int jobs) {
  if (s.settings.threads > 0) return s.settings.threads;
  return threads_per_trial(r.threads ? *r.threads : s.plan.settings.threads, jobs);
}

// Marks the steps a killed or crashed trial process left "running" as failed.
void record_abnormal_end(const Setup& s, const std::string& dir, const Trial& t, const std::string& why) {
  const std::string run = final_run_dir(s.plan, dir, t);
  PostRecord rec = read_post_record(run);
  bool changed = false;
  for (auto& [name, step] : rec.steps)
    if (step.status == "running") {
      step.status = "failed";
      step.message = why;
      step.finished = now_iso();
      changed = true;
    }
  if (changed) write_post_record(run, rec);
}

// Runs the trials with work as child processes (launch/pool.h), `jobs` at a time, each one's output
// appended to <run dir>/post.log. Returns true unless a signal stopped it.
bool run_children(const PostRequest& r, const Setup& s, const std::vector<const Trial*>& work, int jobs, int threads) {
  const std::string prism = r.prism.empty() ? self_executable() : r.prism;
  const size_t width = std::to_string(work.size()).size();
  size_t started = 0;
  const auto log_of = [&](const Trial& t) { return (fs::path(final_run_dir(s.plan, r.dir, t)) / "post.log").string(); };
  PoolOptions pool;
  pool.jobs = jobs;
  pool.timeout_s = r.timeout_s;  // then SIGKILL: a post step keeps nothing half-done worth a grace period
  PoolHooks hooks;
  hooks.start = [&](size_t i) -> std::optional<pid_t> {
    const Trial& t = *work[i];
    std::vector<std::string> args{"sweep", r.dir, "--post", s.post_yaml, "--task-index", std::to_string(t.index)};
    if (!r.retry_failed) args.push_back("--no-retry");
    const pid_t pid = spawn_prism(prism, args, log_of(t), threads, false);
    say(r.note, fmt::format("[{:>{}}/{}] post    {} ({} thread{})\n", ++started, width, work.size(), t.name, threads,
                            threads == 1 ? "" : "s"));
    return pid;
  };
  hooks.finished = [&](const PoolChild& c, int status) {
    const Trial& t = *work[c.item];
    const int code = exit_code(status);
    const std::string log = log_of(t);
    if (c.timed_out) record_abnormal_end(s, r.dir, t, fmt::format("timed out after {:.0f} s", r.timeout_s));
    else if (WIFSIGNALED(status))
      record_abnormal_end(s, r.dir, t, fmt::format("the trial process ended by signal {} (log: {})", WTERMSIG(status), log));
    say(r.note, fmt::format("        {} {} after {:.1f} s{}\n", t.name,
                            code == 0 ? "done" : code == 1 ? "had failures" : fmt::format("ended with {}", code),
                            c.seconds(), code == 0 ? "" : fmt::format(" (log: {})", log)));
  };
  // INT, TERM or USR1: no more trials; the running ones are asked to stop.
  hooks.stop = [](const std::vector<PoolChild>& running, const PoolSignals&) {
    for (const auto& c : running) kill(c.pid, SIGTERM);
  };
  return !run_pool(work.size(), pool, hooks).stopped;
}

// The summary table: one row per trial, one column per step.
std::string format_post_table(const Setup& s, const std::string& dir, const std::vector<TrialWork>& trials) {
  std::vector<std::string> steps;
  for (const auto& w : trials)
    for (const auto& n : post_step_names(s.settings, s.plan, *w.trial))
      if (std::find(steps.begin(), steps.end(), n) == steps.end()) steps.push_back(n);
  size_t name_w = 5;
  for (const auto& w : trials) name_w = std::max(name_w, w.trial->name.size());
  std::ostringstream os;
  os << fmt::format("post-processing of sweep {}: {} trials\n", s.plan.settings.name, trials.size());
  os << fmt::format("{:<{}}", "trial", name_w);
  for (const auto& n : steps) os << fmt::format("  {:<{}}", n, std::max<size_t>(n.size(), 9));
  os << "\n";
  std::vector<std::string> failures;
  int not_ready = 0;
  for (const auto& w : trials) {
    os << fmt::format("{:<{}}", w.trial->name, name_w);
    const PostRecord rec = w.ready ? read_post_record(final_run_dir(s.plan, dir, *w.trial)) : PostRecord{};
    const auto own = post_step_names(s.settings, s.plan, *w.trial);
    for (const auto& n : steps) {
      std::string cell = "-";
      if (!w.ready) cell = "not ready";
      else if (std::find(own.begin(), own.end(), n) == own.end()) cell = "";
      else if (auto it = rec.steps.find(n); it != rec.steps.end()) cell = it->second.status;
      else cell = "pending";
      if (cell == "failed" || cell == "running") {
        failures.push_back(fmt::format("{}: {}: {}", w.trial->name, n, rec.steps.at(n).message.empty()
                                                                           ? "cut short (see post.log)"
                                                                           : rec.steps.at(n).message));
        cell = "FAILED";
      }
      os << fmt::format("  {:<{}}", cell, std::max<size_t>(n.size(), 9));
    }
    os << "\n";
    not_ready += !w.ready;
  }
  if (not_ready)
    os << fmt::format("{} trial(s) have not completed their full-budget run: post-process again once they have\n",
                      not_ready);
  for (const auto& f : failures) os << "  failed: " << f << "\n";
  return os.str();
}

// post.csv: one row per trial and step.
void write_post_csv(const Setup& s, const std::string& dir, const std::vector<TrialWork>& trials) {
  auto field = [](const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string q = "\"";
    for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::ostringstream csv;
  csv << "trial,run_dir,step,status,wall_s,finished,key,message\n";
  for (const auto& w : trials) {
    const std::string run = final_run_dir(s.plan, dir, *w.trial);
    const PostRecord rec = w.ready ? read_post_record(run) : PostRecord{};
    for (const auto& n : post_step_names(s.settings, s.plan, *w.trial)) {
      auto it = rec.steps.find(n);
      const PostStep step = it != rec.steps.end() ? it->second : PostStep{w.ready ? "pending" : "not ready", "", "", 0, ""};
      csv << field(w.trial->name) << "," << field(fs::path(run).lexically_relative(dir).string()) << "," << field(n)
          << "," << step.status << "," << fmt::format("{:.2f}", step.wall_s) << "," << step.finished << ","
          << field(step.key) << "," << field(step.message) << "\n";
    }
  }
  write_file_atomic((fs::path(dir) / "post.csv").string(), csv.str());
}

// Pairs Delta D_l that waited for a baseline, writes post.csv, prints the table.
int collect_post(const PostRequest& r, const Setup& s) {
  for (const auto& t : s.plan.trials) {
    if (!final_run_completed(s.plan, r.dir, t) || !baseline_trial(s.plan, t) || !s.settings.distance) continue;
    const auto pending = pending_post_steps(s.settings, s.plan, r.dir, t, r.retry_failed);
    if (std::find(pending.begin(), pending.end(), "delta") == pending.end()) continue;
    const std::string run = final_run_dir(s.plan, r.dir, t);
    PostRecord rec = read_post_record(run);
    try {
      rec.steps["delta"] = post_delta(s.settings, s.plan, r.dir, t);
    } catch (const std::exception& e) {
      rec.steps["delta"] = PostStep{"failed", "", e.what(), 0, now_iso()};
    }
    write_post_record(run, rec);
  }
  const auto trials = survey(s, r.dir, r.retry_failed);
  write_post_csv(s, r.dir, trials);
  say(r.print, format_post_table(s, r.dir, trials));
  say(r.print, fmt::format("records: {}/post.csv, and post.json in each trial's run directory\n", r.dir));
  bool failed = false;
  for (const auto& w : trials) {
    if (!w.ready) continue;
    const PostRecord rec = read_post_record(final_run_dir(s.plan, r.dir, *w.trial));
    for (const auto& [name, step] : rec.steps) failed = failed || step.status == "failed" || step.status == "running";
  }
  return failed ? 1 : 0;
}

int run_task(const PostRequest& r, const Setup& s) {
  const int i = *r.task_index;
  if (i < 0 || i >= static_cast<int>(s.plan.trials.size()))
    throw Error(fmt::format("task index {} is not a trial of sweep {} (0..{})", i, s.plan.settings.name,
                            s.plan.trials.size() - 1),
                r.dir + "/sweep.yaml", "pass the trial's index from sweep.yaml (prism sweep DIR --dry-run lists them)");
  // No sweep-wide lock: the runner that started this process holds it; the
  // trial's own lock (post_trial) keeps a second process off the same run.
  const Trial& t = s.plan.trials[static_cast<size_t>(i)];
  if (s.settings.threads > 0) torch::set_num_threads(s.settings.threads);
  PostContext ctx;
  ctx.gpt2_vocab = r.gpt2_vocab;
  ctx.retry_failed = r.retry_failed;
  ctx.print = r.print;
  const PostRecord rec = post_trial(s.settings, s.plan, r.dir, t, ctx);
  for (const auto& [name, step] : rec.steps)
    if (step.status == "failed") return 1;
  return 0;
}

bool requests_gpu(const SlurmSettings& slurm) {
  for (const auto& e : slurm.extra)
    if (e.find("--gres=gpu") != std::string::npos || e.find("--gpus") != std::string::npos ||
        e.find("-G ") == 0 || e.find("--gres gpu") != std::string::npos)
      return true;
  return false;
}

// Post-processing on device cuda (distance on long contexts, zero-shot at 757M) says so and asks for a
// GPU; on the CPU it should not hold one.
void check_gpu_request(const PostSettings& settings, const SlurmSettings& slurm, const PostRequest& r) {
  const bool gpu = requests_gpu(slurm);
  if (settings.device == "cuda" && !gpu)
    throw Error("the post file runs its steps on device cuda, but their Slurm jobs request no GPU", r.post_file,
                "add slurm: {extra: [\"--gres=gpu:1\"]} to the post file (or the sweep's sweep.slurm.extra)");
  if (settings.device == "cpu" && gpu)
    say(r.note, "note: the post file runs on the CPU (device: cpu), but its Slurm jobs request a GPU (sweep.slurm.extra); "
                "set slurm: {extra: []} in the post file to leave the GPUs to training\n");
}

int submit_post_to_slurm(const PostRequest& r, const Setup& s, const std::vector<const Trial*>& work, int threads) {
  const std::string dir = fs::absolute(r.dir).lexically_normal().string();
  const std::string slurm_dir = (fs::path(dir) / "slurm").string();
  fs::create_directories(slurm_dir);
  int wave = 0;
  while (fs::exists(fmt::format("{}/post-{}.sh", slurm_dir, wave))) ++wave;
  const SlurmSettings slurm = post_slurm(s.settings, s.plan.settings.slurm);
  check_gpu_request(s.settings, slurm, r);
  const int cpus = slurm.cpus_per_task > 0 ? slurm.cpus_per_task : std::max(1, threads);
  const std::string prism = fs::absolute(r.prism.empty() ? self_executable() : r.prism).string();
  const std::string post_yaml = fs::absolute(s.post_yaml).string();
  std::vector<int> indices;
  for (const Trial* t : work) indices.push_back(t->index);
  std::string spec = array_spec(indices);
  if (slurm.max_parallel > 0) spec += fmt::format("%{}", slurm.max_parallel);
  const std::string retry = r.retry_failed ? "" : " --no-retry";
  std::string array = sbatch_header(slurm, fmt::format("prism-{}-post{}", s.plan.settings.name, wave),
                                    fmt::format("{}/post-{}-%a.out", slurm_dir, wave), cpus);
  array += fmt::format("#SBATCH --array={}\n", spec);
  array += fmt::format("# prism sweep {} --post: one task per trial with steps left ({} trials); the task index is\n"
                       "# the trial's index in sweep.yaml. Rerunning prism sweep DIR --post ... --launcher slurm\n"
                       "# submits what is still left.\n",
                       s.plan.settings.name, indices.size());
  array += fmt::format("exec {} sweep {} --post {} --task-index \"$SLURM_ARRAY_TASK_ID\"{}\n", shell_quote(prism),
                       shell_quote(dir), shell_quote(post_yaml), retry);
  const std::string array_script = fmt::format("{}/post-{}.sh", slurm_dir, wave);
  write_script(array_script, array);
  std::string collect = collect_header(slurm, fmt::format("prism-{}-post{}-collect", s.plan.settings.name, wave),
                                       fmt::format("{}/post-{}-collect.out", slurm_dir, wave));
  collect += "# Pairs Delta D_l, writes post.csv and prints the post-processing table once the array has ended.\n";
  collect += fmt::format("exec {} sweep {} --post {} --collect\n", shell_quote(prism), shell_quote(dir),
                         shell_quote(post_yaml));
  const std::string collect_script = fmt::format("{}/post-{}-collect.sh", slurm_dir, wave);
  write_script(collect_script, collect);
  if (!r.submit) {
    say(r.print, fmt::format("wrote {} (array {}) and {}; submit with:\n  jobid=$(sbatch --parsable {})\n  sbatch "
                             "--dependency=afterany:$jobid {}\n",
                             array_script, spec, collect_script, array_script, collect_script));
    return 0;
  }
  const ArrayJobs jobs = submit_array_then_collect(array_script, collect_script);
  say(r.print, fmt::format("submitted post-processing: array job {} ({} task{}), collection job {}; outputs in {}\n",
                           jobs.array, indices.size(), indices.size() == 1 ? "" : "s", jobs.collect, slurm_dir));
  return 0;
}

}  // namespace

int run_post_request(const PostRequest& r) {
  if (r.launcher != "local" && r.launcher != "slurm")
    throw Error(fmt::format("unknown launcher '{}'", r.launcher), "--launcher", "use local or slurm");
  if (r.task_index) {
    // A trial process or an array task reads the sweep's post.yaml as written.
    Setup s = setup(r);
    return run_task(r, s);
  }
  Setup s = setup(r);
  SweepLock lock = SweepLock::acquire((fs::path(r.dir) / "post.lock").string(), SweepLock::Mode::Exclusive, 0,
                                      "post-processing the sweep");
  if (fs::absolute(r.post_file).lexically_normal() != fs::absolute(s.post_yaml).lexically_normal())
    write_file_atomic(s.post_yaml, post_settings_yaml(s.settings));
  if (r.collect) return collect_post(r, s);
  const auto trials = survey(s, r.dir, r.retry_failed);
  std::vector<const Trial*> work;
  for (const auto& w : trials)
    if (!w.pending.empty()) work.push_back(w.trial);
  const int jobs = std::max(1, r.jobs ? *r.jobs : s.plan.settings.jobs);
  const int threads = threads_each(r, s, jobs);
  say(r.note, fmt::format("post-processing sweep {}: {} of {} trials have steps left, {} at a time, {} thread{} each\n",
                          s.plan.settings.name, work.size(), trials.size(), jobs, threads, threads == 1 ? "" : "s"));
  if (r.launcher == "slurm") {
    if (work.empty()) return collect_post(r, s);
    return submit_post_to_slurm(r, s, work, threads);
  }
  const bool finished = run_children(r, s, work, jobs, threads);
  const int code = collect_post(r, s);
  if (!finished) {
    say(r.note, fmt::format("prism sweep: post-processing stopped; rerun to continue: prism sweep {} --post {}\n",
                            r.dir, r.post_file));
    return 130;
  }
  if (code == 1)
    say(r.note, "prism sweep: some post-processing steps failed (see above and each trial's post.log); rerunning the "
                "same command retries them\n");
  return code;
}

}  // namespace prism
