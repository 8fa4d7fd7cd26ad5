#pragma once
// `prism sweep` as one library call. A request names a sweep file (planned with
// its overrides) or a sweep directory (planned as its sweep.yaml recorded), and
// one thing to do with it: print the composed file, print the plan (dry run), run
// one trial (a Slurm array task), rebuild the index (collect), or run the sweep
// here or under Slurm.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace prism {

struct SweepRequest {
  std::string target;                  // a sweep file, or a sweep directory prism sweep made
  std::vector<std::string> overrides;  // key=value, for a sweep file only
  std::string out;                     // the sweep directory (default: sweeps/<sweep name>); file targets only
  std::optional<int> jobs;             // trials at once (default: sweep.jobs)
  std::optional<int> threads;          // shared by the concurrent trials (default: sweep.threads; 0: every core)
  std::optional<double> timeout_s;     // per trial run (0: none)
  bool retry_failed = false;           // rerun every failed trial
  bool no_retry = false;               // rerun none, not even those that failed before training
  bool force = false;                  // take over a directory made by a different sweep
  bool print_config = false;           // print the composed sweep file; run nothing
  bool dry_run = false;                // print the trials; run nothing
  std::string pilot;                   // --dry-run: a finished sweep whose paired sd plans the seeds
  bool collect = false;                // rebuild summary.csv and sweep.h5; run nothing
  std::optional<int> task_index;       // run this one trial of a sweep directory
  int rung = 0;                        // with task_index: the halving rung
  std::string launcher = "local";      // local | slurm
  // Post-process the sweep directory instead (post_run.h): this post file, with
  // `overrides` applied to it; jobs, threads, timeout, retry, collect, task_index,
  // launcher and submit keep their meaning.
  std::string post;
  std::string gpt2_vocab;              // post: GPT-2's vocabulary, for models whose config names none
  bool submit = true;                  // slurm: submit the job scripts (false: only write them)
  std::function<void(const std::string&)> print;  // tables and plans (stdout)
  std::function<void(const std::string&)> note;   // what to do next after a stop or failures (stderr)
};

// Returns the exit code: 0; 1 when trials failed; 130 when stopped by a signal;
// a Slurm task's own. Throws prism::Error, before anything runs, for a bad
// request: contradicting or misplaced options, a missing sweep.yaml, a sweep
// directory made by a different sweep.
int run_sweep_request(const SweepRequest& request);

}  // namespace prism
