// launch/: the stop signals a launcher counts (and hands back when it ends), and the
// shell commands Slurm's side runs. The trainer's handlers are checked end to end
// ([train][run]: SIGUSR1 stops a run at a checkpoint) and on a real Slurm ([slurm]).
#include <catch2/catch.hpp>

#include <csignal>
#include <string>

#include "prism/error.h"
#include "prism/launch/process.h"
#include "prism/launch/signals.h"

using namespace prism;

namespace {
volatile std::sig_atomic_t g_outer = 0;
void outer_handler(int) { g_outer = g_outer + 1; }
}  // namespace

TEST_CASE("a SignalScope counts INT, TERM and USR1 by kind and gives the old handlers back", "[launch]") {
  struct sigaction sa {}, before {};
  sa.sa_handler = outer_handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, &before);
  g_outer = 0;
  {
    SignalScope scope;
    CHECK(scope.count() == 0);
    CHECK(scope.last() == 0);
    std::raise(SIGUSR1);
    std::raise(SIGUSR1);
    std::raise(SIGTERM);
    std::raise(SIGINT);
    CHECK(scope.count() == 4);
    CHECK(scope.count_of(SIGUSR1) == 2);
    CHECK(scope.count_of(SIGTERM) == 1);
    CHECK(scope.count_of(SIGINT) == 1);
    CHECK(scope.count_of(SIGHUP) == 0);
    CHECK(scope.last() == SIGINT);
    CHECK(g_outer == 0);  // the scope's handler ran, not the one it replaced
  }
  std::raise(SIGUSR1);
  CHECK(g_outer == 1);  // the replaced handler is back
  {
    SignalScope again;  // a new scope starts from zero
    CHECK(again.count() == 0);
  }
  sigaction(SIGUSR1, &before, nullptr);
  CHECK(signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(64) == "signal 64");
}

TEST_CASE("run_command returns a command's output and fails with it, naming what ran", "[launch]") {
  CHECK(run_command("printf 'job 42\\n\\n'", "echo") == "job 42");
  CHECK(run_command("echo " + shell_quote("it's a 'test' $HOME"), "echo") == "it's a 'test' $HOME");
  CHECK_THROWS_WITH(run_command("echo nope >&2; exit 3", "sbatch"), Catch::Contains("sbatch failed: nope"));
}
