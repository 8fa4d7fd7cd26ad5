#pragma once
// A pool of child processes: items started up to `jobs` at once, reaped as they
// end, each stopped at a timeout, and the whole pool stopped by a signal. What a
// child is and what its end means belong to the caller: a sweep's runs
// (sweep/local_launcher) and post-processing's trials (post/post_run) are the two
// users. The children themselves are started by the caller, through spawn_prism
// (launch/process.h).
//
// A stop signal (SIGINT, SIGTERM or SIGUSR1, counted by a SignalScope while the
// pool runs) starts nothing more; the pool tells the caller which signals came,
// and the caller passes them on to the running children as they need, then the
// pool waits for those to end.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace prism {

struct PoolChild {
  size_t item = 0;                                // the item's index, 0..items-1
  pid_t pid = -1;
  std::chrono::steady_clock::time_point start;
  bool timed_out = false;                         // it ran past the timeout and was signalled
  std::chrono::steady_clock::time_point kill_at;  // when a timed-out child gets SIGKILL
  double seconds() const;                         // since it started
};

struct PoolOptions {
  int jobs = 1;
  double timeout_s = 0;  // per child; 0: none
  // After the timeout: SIGTERM, then SIGKILL once grace_s has passed; 0: SIGKILL at once.
  double grace_s = 0;
  bool signal_group = false;  // the timeout's signals go to the child's process group (-pid)
};

// New stop signals since the last call: how many SIGUSR1, how many SIGINT or SIGTERM.
struct PoolSignals {
  int usr1 = 0;
  int others = 0;
  int last = 0;        // the latest signal
  bool first = false;  // the first time the pool was asked to stop
};

struct PoolHooks {
  // Starts item i and returns its pid, or nothing when the item is skipped.
  std::function<std::optional<pid_t>(size_t item)> start;
  // A child ended with `wait_status` (waitpid's).
  std::function<void(const PoolChild&, int wait_status)> finished;
  // A child ran past the timeout; called once, before the pool signals it.
  std::function<void(const PoolChild&)> timed_out;
  // Stop signals arrived (the pool starts nothing more); `running` are the children to pass them on to.
  std::function<void(const std::vector<PoolChild>& running, const PoolSignals&)> stop;
};

struct PoolResult {
  bool stopped = false;  // a signal stopped the pool
  int signal = 0;        // the latest one
};

// Runs items 0..items-1 through the hooks; returns when every started child has ended.
PoolResult run_pool(size_t items, const PoolOptions& options, const PoolHooks& hooks);

// The exit status of a wait status: the code, or 128 + the signal that ended it.
int exit_code(int wait_status);

}  // namespace prism
