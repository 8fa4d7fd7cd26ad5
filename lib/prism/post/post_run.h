#pragma once
// Post-processing a study sweep, `prism sweep SWEEP_DIR --post POST.yaml`: each
// trial that completed at the full budget gets its post_trial steps (distance,
// Delta D_l, zero-shot tasks), the way the sweep runs its trials:
//   here     each trial is a child process (`prism sweep DIR --post DIR/post.yaml
//            --task-index I`, output in <run dir>/post.log), --jobs at a time, so
//            a crash or a hang (--timeout) takes only that trial down;
//   slurm    a job array, one task per trial that has work (the same command with
//            $SLURM_ARRAY_TASK_ID), and a collection job after it (afterany);
//   a task   --task-index I: one trial, in this process.
// Resumable: a rerun skips every step already done with the same inputs, and
// (unless --no-retry) reruns failed ones. A failing step or trial is recorded and
// reported; the others go on. Collecting (at the end here, by the collection job
// on Slurm, or --collect) writes Delta D_l for pairs whose baseline finished
// later, post.csv (one row per trial and step) and prints the table.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace prism {

struct PostRequest {
  std::string dir;                     // the sweep directory
  std::string post_file;               // the post file
  std::vector<std::string> overrides;  // key=value for the post file
  std::optional<int> task_index;       // post-process this one trial here
  bool collect = false;                // pair Delta D_l, write post.csv, print; run nothing
  std::string launcher = "local";      // local | slurm
  bool submit = true;                  // slurm: submit the scripts (false: only write them)
  std::optional<int> jobs;             // trials at once (default: the sweep's jobs)
  std::optional<int> threads;          // shared by the concurrent trials (default: the sweep's; 0: every core)
  double timeout_s = 0;                // per trial process; 0: none
  bool retry_failed = true;            // rerun steps that failed before
  std::string prism;                   // the binary the trial processes run (default: this one)
  std::string gpt2_vocab;              // GPT-2's vocabulary, for models whose config names none
  std::function<void(const std::string&)> print;  // tables (stdout)
  std::function<void(const std::string&)> note;   // progress and what to do next (stderr)
};

// Returns 1 when a step or a trial failed, 130 when stopped by a signal, else 0
// (trials that have not completed their training are listed, not failed). Throws prism::Error before anything runs for a bad
// request: a directory that is no sweep, a bad post file, a missing task file, a
// device that is not here.
int run_post_request(const PostRequest& request);

}  // namespace prism
