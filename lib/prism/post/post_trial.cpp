#include "prism/post/post_trial.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "prism/analysis/distance_delta.h"
#include "prism/analysis/distance_profile.h"
#include "prism/analysis/heldout_distance.h"
#include "prism/error.h"
#include "prism/eval/evaluate_checkpoint.h"
#include "prism/model/placement.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/store/run_reader.h"
#include "prism/store/run_store.h"
#include "prism/sweep/halving.h"
#include "prism/sweep/sweep_dir.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

void say(const PostContext& ctx, const std::string& text) {
  if (ctx.print) ctx.print(text);
}

// A file by path and size: a task file replaced by another gives another key.
std::string file_key(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return fmt::format("{} ({} bytes)", path, ec ? 0 : size);
}

std::string checkpoint_key(const std::string& run_dir) {
  auto c = latest_checkpoint(run_dir);
  return c ? *c : "none";
}

// The held-out data of a trial: the post file's, else the trial's own data.dir.
std::string distance_data(const PostSettings& s, const Trial& t) {
  if (!s.distance_data.empty()) return s.distance_data;
  try {
    return YAML::Load(t.config)["data"]["dir"].as<std::string>("");
  } catch (const YAML::Exception&) {
    return "";
  }
}

// What a step is computed from; a done step with another key is redone.
std::string step_key(const PostSettings& s, const SweepPlan& plan, const std::string& sweep_dir, const Trial& t,
                     const std::string& step) {
  const std::string run = final_run_dir(plan, sweep_dir, t);
  if (step == "distance")
    return fmt::format("checkpoint {}; data {}; tokens {}; batch {}; bins {}; seq_len {}", checkpoint_key(run),
                       distance_data(s, t), s.distance_tokens, s.distance_batch, s.distance_bins, s.distance_seq_len);
  if (step == "delta") {
    const Trial* base = baseline_trial(plan, t);
    return fmt::format("checkpoint {}; baseline {} at {}", checkpoint_key(run), base ? base->name : "none",
                       base ? checkpoint_key(final_run_dir(plan, sweep_dir, *base)) : "none");
  }
  for (const auto& task : s.tasks)
    if (step == "eval/" + task.task)
      return fmt::format("checkpoint {}; data {}; labels {}; limit {}", checkpoint_key(run), file_key(task.data),
                         task.labels.empty() ? "none" : file_key(task.labels), s.limit);
  return "";
}

// The step's result group in run.h5 ("" for none to check).
std::string result_group(const std::string& step) {
  if (step == "distance") return "attention/heldout";
  if (step == "delta") return "attention/delta";
  return step;  // eval/<task>
}

bool has_result(const std::string& run_dir, const std::string& step) {
  try {
    return RunReader(run_dir).has_group(result_group(step));
  } catch (const Error&) {
    return false;
  }
}

bool step_done(const PostRecord& rec, const std::string& step, const std::string& key, const std::string& run_dir) {
  auto it = rec.steps.find(step);
  return it != rec.steps.end() && it->second.status == "done" && it->second.key == key && has_result(run_dir, step);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_eval(const PostSettings& s, const PostTask& task, const std::string& run_dir, const Placement& placement,
              const PostContext& ctx) {
  EvalRequest r;
  r.checkpoint = run_dir;
  r.task = task.task;
  r.data = task.data;
  r.labels = task.labels;
  r.limit = s.limit;
  r.batch_tokens = s.batch_tokens;
  r.gpt2_vocab = ctx.gpt2_vocab;
  r.placement = placement;
  r.print = ctx.print;
  r.note = ctx.print;
  evaluate_checkpoint(r);
}

void run_distance(const PostSettings& s, const Trial& t, const std::string& run_dir, const Placement& placement,
                  const PostContext& ctx) {
  HeldOutRequest h;
  h.checkpoints = {run_dir};
  h.data = distance_data(s, t);
  if (h.data.empty())
    throw Error(fmt::format("trial {} names no data.dir to measure distance on", t.name), s.source,
                "set distance: {data: DIR} in the post file");
  h.tokens = s.distance_tokens;
  h.batch = s.distance_batch;
  h.bins = s.distance_bins;
  h.seq_len = s.distance_seq_len;
  h.placement = placement;
  h.print = ctx.print;
  h.note = ctx.print;
  measure_heldout(h);
}

std::string now_text() { return now_iso(); }

}  // namespace

std::vector<std::string> post_step_names(const PostSettings& s, const SweepPlan& plan, const Trial& t) {
  std::vector<std::string> steps;
  if (s.distance) {
    steps.push_back("distance");
    if (baseline_trial(plan, t)) steps.push_back("delta");
  }
  for (const auto& task : s.tasks) steps.push_back("eval/" + task.task);
  return steps;
}

std::vector<std::string> pending_post_steps(const PostSettings& s, const SweepPlan& plan, const std::string& sweep_dir,
                                            const Trial& t, bool retry_failed) {
  if (!final_run_completed(plan, sweep_dir, t)) return {};
  const std::string run = final_run_dir(plan, sweep_dir, t);
  const PostRecord rec = read_post_record(run);
  std::vector<std::string> out;
  for (const auto& step : post_step_names(s, plan, t)) {
    auto it = rec.steps.find(step);
    if (!retry_failed && it != rec.steps.end() && it->second.status == "failed") continue;
    if (step == "delta" && it != rec.steps.end() && it->second.status == "waiting") {
      // Waiting on the baseline's profile: work only once that exists.
      const Trial* base = baseline_trial(plan, t);
      if (!base || !has_result(final_run_dir(plan, sweep_dir, *base), "distance")) continue;
    }
    if (!step_done(rec, step, step_key(s, plan, sweep_dir, t, step), run)) out.push_back(step);
  }
  return out;
}

PostStep post_delta(const PostSettings& s, const SweepPlan& plan, const std::string& sweep_dir, const Trial& t) {
  PostStep step;
  step.key = step_key(s, plan, sweep_dir, t, "delta");
  const auto t0 = std::chrono::steady_clock::now();
  const Trial* base = baseline_trial(plan, t);
  const std::string run = final_run_dir(plan, sweep_dir, t);
  if (!base) {
    step.status = "failed";
    step.message = "no uniform trial with the same seed and grid values";
    return step;
  }
  const std::string base_run = final_run_dir(plan, sweep_dir, *base);
  if (!has_result(base_run, "distance") || !has_result(run, "distance")) {
    step.status = "waiting";
    step.message = fmt::format("{} has no held-out distance profile yet", has_result(run, "distance") ? base->name : t.name);
    return step;
  }
  DistanceProfile mine = read_profile(RunReader(run), false);
  DistanceProfile theirs = read_profile(RunReader(base_run), false);
  mine.source = t.name;
  theirs.source = base->name;
  DistanceDelta d = distance_delta({mine}, {theirs}, 0.95);
  RunStore store = RunStore::open((fs::path(run) / "run.h5").string());
  store.write_group("attention/delta", to_result_group(d));
  store.close();
  step.status = "done";
  step.wall_s = seconds_since(t0);
  step.finished = now_text();
  return step;
}

PostRecord post_trial(const PostSettings& s, const SweepPlan& plan, const std::string& sweep_dir, const Trial& t,
                      const PostContext& ctx) {
  const std::string run = final_run_dir(plan, sweep_dir, t);
  if (!final_run_completed(plan, sweep_dir, t))
    throw Error(fmt::format("trial {} has not completed its full-budget run", t.name), run,
                "finish the sweep first (prism sweep DIR); post-processing reads the final checkpoint");
  // One process per trial: a second runner on the same trial would write the same run.h5.
  SweepLock lock = SweepLock::acquire((fs::path(run) / ".post.lock").string(), SweepLock::Mode::Exclusive, 0,
                                      "post-processing this trial");
  const Placement placement = resolve_placement(s.device, s.backend);
  PostRecord rec = read_post_record(run);
  const auto pending = pending_post_steps(s, plan, sweep_dir, t, ctx.retry_failed);
  for (const auto& name : post_step_names(s, plan, t)) {
    if (std::find(pending.begin(), pending.end(), name) == pending.end()) continue;
    PostStep& step = rec.steps[name];
    step = PostStep{"running", step_key(s, plan, sweep_dir, t, name), "", 0, ""};
    write_post_record(run, rec);  // a crash leaves "running": the step was cut short
    const auto t0 = std::chrono::steady_clock::now();
    say(ctx, fmt::format("post {}: {} ...\n", t.name, name));
    try {
      if (name == "distance") {
        run_distance(s, t, run, placement, ctx);
      } else if (name == "delta") {
        step = post_delta(s, plan, sweep_dir, t);
      } else {
        for (const auto& task : s.tasks)
          if (name == "eval/" + task.task) run_eval(s, task, run, placement, ctx);
      }
      if (step.status == "running") step.status = "done";
    } catch (const std::exception& e) {
      step.status = "failed";
      step.message = e.what();
    }
    step.wall_s = seconds_since(t0);
    step.finished = now_text();
    write_post_record(run, rec);
    say(ctx, fmt::format("post {}: {} {} ({:.1f} s){}\n", t.name, name, step.status, step.wall_s,
                         step.message.empty() ? "" : ": " + step.message));
  }
  return rec;
}

}  // namespace prism
