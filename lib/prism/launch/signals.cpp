#include "prism/launch/signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <string>

namespace prism {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};
constexpr int kKinds = 3;

int kind_of(int sig) {
  for (int i = 0; i < kKinds; ++i)
    if (kStopSignals[i] == sig) return i;
  return -1;
}

void install(void (*handler)(int), struct sigaction* old) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < kKinds; ++i) sigaction(kStopSignals[i], &sa, old ? &old[i] : nullptr);
}

// --- the trainer's, process-wide ---------------------------------------------------
std::atomic<int> g_stop{0};

void on_stop(int sig) {
  int none = 0;
  if (!g_stop.compare_exchange_strong(none, sig)) {
    if (sig == SIGUSR1) return;  // a cluster's warning again (or passed on twice): not a request to hurry
    _exit(128 + sig);            // a second INT or TERM: leave now
  }
  const char msg[] = "\nprism: stop requested; finishing this step and writing a checkpoint (signal again to abort)\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)n;
}

// --- a launcher's, scoped ------------------------------------------------------------
std::atomic<int> g_count{0};
std::atomic<int> g_last{0};
std::atomic<int> g_by_kind[kKinds];
struct sigaction g_old[kKinds];

void on_count(int sig) {
  const int k = kind_of(sig);
  if (k >= 0) g_by_kind[k].fetch_add(1);
  g_last.store(sig);
  g_count.fetch_add(1);
}

}  // namespace

void install_stop_handlers() { install(on_stop, nullptr); }
bool stop_requested() { return g_stop.load() != 0; }
int stop_signal() { return g_stop.load(); }

SignalScope::SignalScope() {
  g_count = 0;
  g_last = 0;
  for (auto& k : g_by_kind) k = 0;
  install(on_count, g_old);
}

SignalScope::~SignalScope() {
  for (int i = 0; i < kKinds; ++i) sigaction(kStopSignals[i], &g_old[i], nullptr);
}

int SignalScope::count() const { return g_count.load(); }
int SignalScope::last() const { return g_last.load(); }
int SignalScope::count_of(int sig) const {
  const int k = kind_of(sig);
  return k < 0 ? 0 : g_by_kind[k].load();
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGKILL: return "SIGKILL";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace prism
