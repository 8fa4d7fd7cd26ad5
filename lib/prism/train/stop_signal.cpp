#include "prism/train/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace prism {

namespace {
std::atomic<int> g_signal{0};

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) _exit(128 + sig);  // second signal: leave now
  const char msg[] = "\nprism: stop requested; finishing this step and writing a checkpoint (signal again to abort)\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)n;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_signal.load() != 0; }
int stop_signal() { return g_signal.load(); }

}  // namespace prism
