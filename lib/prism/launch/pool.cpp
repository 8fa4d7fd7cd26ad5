#include "prism/launch/pool.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <thread>

#include "prism/launch/signals.h"

namespace prism {

using Clock = std::chrono::steady_clock;

double PoolChild::seconds() const { return std::chrono::duration<double>(Clock::now() - start).count(); }

int exit_code(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

namespace {

class Pool {
 public:
  Pool(size_t items, const PoolOptions& o, const PoolHooks& h)
      : items_(items), o_(o), h_(h), jobs_(static_cast<size_t>(std::max(1, o.jobs))) {}

  PoolResult run() {
    while (next_ < items_ || !running_.empty()) {
      handle_signals();
      while (!result_.stopped && next_ < items_ && running_.size() < jobs_) start(next_++);
      if (result_.stopped) next_ = items_;
      poll();
      if (!running_.empty() || next_ < items_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return result_;
  }

 private:
  void handle_signals() {
    const int seen = signals_.count();
    if (seen <= seen_) return;
    const int usr1 = signals_.count_of(SIGUSR1);
    PoolSignals s;
    s.usr1 = usr1 - usr1_seen_;
    s.others = (seen - usr1) - (seen_ - usr1_seen_);
    s.last = signals_.last();
    s.first = !result_.stopped;
    seen_ = seen;
    usr1_seen_ = usr1;
    result_.stopped = true;
    result_.signal = s.last;
    if (h_.stop) h_.stop(running_, s);
  }

  void start(size_t item) {
    const std::optional<pid_t> pid = h_.start(item);
    if (!pid) return;
    PoolChild c;
    c.item = item;
    c.pid = *pid;
    c.start = Clock::now();
    running_.push_back(c);
  }

  void poll() {
    for (size_t i = 0; i < running_.size();) {
      int status = 0;
      if (waitpid(running_[i].pid, &status, WNOHANG) == running_[i].pid) {
        const PoolChild ended = running_[i];
        running_.erase(running_.begin() + static_cast<long>(i));
        if (h_.finished) h_.finished(ended, status);
        continue;
      }
      enforce_timeout(running_[i]);
      ++i;
    }
  }

  void enforce_timeout(PoolChild& c) {
    const pid_t target = o_.signal_group ? -c.pid : c.pid;
    if (o_.timeout_s > 0 && !c.timed_out && c.seconds() > o_.timeout_s) {
      c.timed_out = true;
      if (h_.timed_out) h_.timed_out(c);
      if (o_.grace_s > 0) {
        c.kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.grace_s));
        kill(target, SIGTERM);  // asked to checkpoint and stop
      } else {
        c.kill_at = Clock::now() + std::chrono::hours(1);
        kill(target, SIGKILL);
      }
    } else if (c.timed_out && Clock::now() > c.kill_at) {
      kill(target, SIGKILL);
      c.kill_at = Clock::now() + std::chrono::hours(1);
    }
  }

  const size_t items_;
  const PoolOptions& o_;
  const PoolHooks& h_;
  const size_t jobs_;
  SignalScope signals_;  // counts SIGINT, SIGTERM and SIGUSR1 while the pool runs
  int seen_ = 0, usr1_seen_ = 0;
  size_t next_ = 0;      // the next item to start
  std::vector<PoolChild> running_;
  PoolResult result_;
};

}  // namespace

PoolResult run_pool(size_t items, const PoolOptions& options, const PoolHooks& hooks) {
  return Pool(items, options, hooks).run();
}

}  // namespace prism
