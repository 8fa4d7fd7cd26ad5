#pragma once
// The signals that ask Prism to stop, handled in one place for every process:
//   SIGINT   Ctrl-C
//   SIGTERM  kill, and Slurm at a time limit (SIGKILL follows after its KillWait)
//   SIGUSR1  what a cluster sends ahead of a time limit or a preemption when asked
//            (#SBATCH --signal=B:USR1@SECONDS, which sweeps on Slurm write)
// Two kinds of process stop on them:
//   - a trainer: install_stop_handlers() for the rest of the process; the first
//     signal asks it to finish the step, write a checkpoint and exit (status 130,
//     resumable); a second SIGINT or SIGTERM exits at once (a second SIGUSR1 is
//     ignored: a warning repeated, or passed on by a launcher as well);
//   - a launcher (a sweep, post-processing): a SignalScope for as long as it runs,
//     which counts the signals so the launcher stops starting work and passes the
//     request on; the handlers it replaced come back when it ends.
// Both are async-signal-safe: the handlers only store a number (and the trainer's
// writes one line to stderr).
#include <string>

namespace prism {

// The trainer's handlers (INT, TERM, USR1), for the rest of the process.
void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the first signal received, 0 if none

// Counts INT, TERM and USR1 while it lives (one at a time: not nested).
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  int count() const;      // signals received since the scope began
  int last() const;       // the latest one, 0 if none
  int count_of(int sig) const;  // of one kind (SIGINT, SIGTERM or SIGUSR1)
};

// "SIGUSR1", "SIGTERM", ... ("signal N" for others).
std::string signal_name(int sig);

}  // namespace prism
