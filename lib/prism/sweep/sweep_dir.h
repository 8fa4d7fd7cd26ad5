#pragma once
// The sweep directory (docs/sweeps.md) and what keeps it consistent:
//
//   <dir>/sweep.yaml          the resolved plan (plan.h); a rerun must match it
//   <dir>/sweep.lock          held by the runner (exclusive) or Slurm tasks (shared)
//   <dir>/<trial>/            a run directory: config.yaml, run.h5, checkpoints/,
//                             trial.yaml (what the runner asked for), train.log,
//                             trial.json (the runner's record of each attempt)
//   <dir>/<trial>/rung<k>/    with successive halving: one run directory per rung
//   <dir>/sweep.h5, summary.csv, ranking.txt   the index (index.h)
//
// A run's state comes from its run.h5 status (written by the trainer) and the
// runner's record (for what the trainer cannot say: a crash, a timeout).
#include <optional>
#include <string>

#include "prism/sweep/plan.h"

namespace prism {

// The run directory of a trial at a rung (rung ignored without halving).
std::string run_dir(const std::string& sweep_dir, const Trial& t, int rung, bool halving);

// An flock on a file, released when destroyed or when the process dies; never
// inherited by child processes.
class SweepLock {
 public:
  enum class Mode { Exclusive, Shared };
  // Waits up to wait_s for the lock; then throws prism::Error naming the holder.
  static SweepLock acquire(const std::string& path, Mode mode, double wait_s, const std::string& purpose);
  SweepLock(SweepLock&& o) noexcept : fd_(o.fd_), exclusive_(o.exclusive_) { o.fd_ = -1; }
  SweepLock& operator=(SweepLock&&) = delete;
  SweepLock(const SweepLock&) = delete;
  ~SweepLock();

 private:
  explicit SweepLock(int fd) : fd_(fd) {}
  int fd_ = -1;
  bool exclusive_ = false;
};

// The runner's record of a run (trial.json).
struct RunRecord {
  std::string status = "pending";  // pending | running | completed | interrupted | failed
  std::string message;             // why it failed or stopped
  int attempts = 0;
  int exit_code = 0;
  double wall_s = 0;               // summed over attempts
  std::string started, finished;   // ISO times of the last attempt
  int threads = 0;
};
RunRecord read_record(const std::string& run_dir);
void write_record(const std::string& run_dir, const RunRecord& r);

enum class RunState {
  Pending,     // never started
  Completed,   // run.h5 says completed
  Resumable,   // started, not finished, has a checkpoint: continue it
  Restart,     // started, not finished, no checkpoint: start it over
  Failed,      // the trainer failed, crashed or timed out
};

struct RunInspection {
  RunState state = RunState::Pending;
  std::string h5_status;           // "" without run.h5
  std::optional<std::string> checkpoint;
  bool trained = false;            // it got as far as a training step (a train row or a checkpoint)
  RunRecord record;
};
RunInspection inspect_run(const std::string& run_dir);

// Which failed runs a launch runs again. A run that failed before its first
// training step (a corpus not prepared yet, a missing file, a bad setting) has
// nothing to keep and failed for a reason outside the run, which may be fixed
// by now: rerunning a sweep retries it (Untrained, the default). A run that
// failed while training (diverged, crashed, timed out) would spend its compute
// again on the same result, so only --retry-failed reruns it (All).
enum class RetryPolicy { None, Untrained, All };

// Whether a launch with this policy runs (starts, resumes or retries) the run.
bool needs_run(const RunInspection& run, RetryPolicy retry);

// What prepare_sweep_dir did to a directory an earlier sweep made.
struct SweepDirChange {
  std::string replaced;  // where --force moved the earlier sweep's other trials and index ("" if nowhere)
  size_t added = 0;      // trials a grown grid added (every earlier trial kept, unchanged)
  size_t kept = 0;       // the earlier trials the grown grid keeps
  std::string message() const;  // one line for the log ("" if nothing changed)
};

// Creates the directory with sweep.yaml, or checks that the one there was made
// by the same sweep. With `allow_growth`, a grown grid (every earlier trial still
// there with the same config, more added; no successive halving, whose rungs a
// new trial would change) is taken as it is: a grid run in chunks of seeds. (The
// local runner allows it; Slurm does not, as a grown grid renumbers the trials
// that queued array tasks name by index.) Any other sweep is refused unless
// `force`; then the trials it does not share with `plan` (and its index) move to
// <dir>/replaced-<time>/, so nothing is lost.
SweepDirChange prepare_sweep_dir(const std::string& dir, const SweepPlan& plan, bool force, bool allow_growth);

// The local time as 2026-11-29T19:40:00.
std::string now_iso();

// The trial's run at the full budget (the last rung under halving), and whether it completed.
std::string final_run_dir(const SweepPlan& plan, const std::string& sweep_dir, const Trial& t);
bool final_run_completed(const SweepPlan& plan, const std::string& sweep_dir, const Trial& t);

// The uniform trial with the same seed and other grid values (nullptr: none, or `t` is uniform).
const Trial* baseline_trial(const SweepPlan& plan, const Trial& t);

}  // namespace prism
