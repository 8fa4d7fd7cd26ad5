#pragma once
// One trial's post-processing, the unit that runs as a child process here or as
// a Slurm array task: on the trial's full-budget run (its newest checkpoint),
//   distance      its attention-distance profile on held-out tokens (prism distance),
//                 stored under /attention/heldout of its run.h5;
//   delta         for a Prism schedule, Delta D_l against the uniform trial of the
//                 same seed and other grid values, once that one has its profile
//                 (until then the step waits; collecting the sweep pairs it later);
//   eval/<task>   each zero-shot task of the post file (prism eval), /eval/<task>.
// Every step is recorded in the run's post.json (post_record.h): a step done with
// the same inputs is skipped, a failing step is recorded with its reason and the
// others still run. A trial writes only its own run.h5.
#include <functional>
#include <string>
#include <vector>

#include "prism/post/post_record.h"
#include "prism/post/post_settings.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/sweep_dir.h"  // final_run_dir, baseline_trial

namespace prism {

struct PostContext {
  std::string gpt2_vocab;    // for models whose config names no vocabulary (older runs, llm.c data)
  bool retry_failed = true;  // rerun steps that failed before (false: leave them failed)
  std::function<void(const std::string&)> print;  // what each step prints
};

// The steps of the post file, in the order they run: distance, delta (Prism
// trials), then eval/<task> per task.
std::vector<std::string> post_step_names(const PostSettings& s, const SweepPlan& plan, const Trial& t);

// The steps that would run now (empty: the trial is done, or not completed yet).
// Cheap: reads post.json, run.h5's groups and file sizes; loads no model.
std::vector<std::string> pending_post_steps(const PostSettings& s, const SweepPlan& plan, const std::string& sweep_dir,
                                            const Trial& t, bool retry_failed);

// Runs the trial's pending steps here and returns its record afterwards. Throws
// prism::Error only when the trial cannot be post-processed at all (not
// completed at the full budget; its run directory locked by another process).
PostRecord post_trial(const PostSettings& s, const SweepPlan& plan, const std::string& sweep_dir, const Trial& t,
                      const PostContext& ctx);

// Writes Delta D_l into a Prism trial's run.h5 when both it and its baseline have
// profiles on the same tokens; records the step. No model is loaded.
PostStep post_delta(const PostSettings& s, const SweepPlan& plan, const std::string& sweep_dir, const Trial& t);

}  // namespace prism
