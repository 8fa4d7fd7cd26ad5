#pragma once
// Launching a job of several `prism` processes as torchrun's workers (the
// variables torchrun gives each), for the data-parallel tests (test_ddp.cpp,
// test/search/test_search_run.cpp).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "prism/train/distributed.h"
#include "support.h"

namespace prism::test {

inline int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

// One rank of a job, started with the variables torchrun gives each worker.
struct Rank {
  pid_t pid = -1;
  std::string log;
  int exit_code = -1;
  std::string output() const { return read_file_or_empty(log); }
};

inline std::vector<Rank> launch(int world, const std::vector<std::string>& args, const std::string& log_dir,
                         const std::map<std::string, std::string>& extra_env = {}) {
  const int port = free_port();
  std::vector<Rank> ranks(world);
  for (int r = 0; r < world; ++r) {
    ranks[r].log = fmt::format("{}/rank{}.log", log_dir, r);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::map<std::string, std::string> env = {
          {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}, {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)}, {"GROUP_RANK", "0"}, {"ROLE_RANK", std::to_string(r)},
          {"ROLE_NAME", "default"}, {"ROLE_WORLD_SIZE", std::to_string(world)}, {"GROUP_WORLD_SIZE", "1"},
          {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)},
          {"TORCHELASTIC_RESTART_COUNT", "0"}, {"TORCHELASTIC_MAX_RESTARTS", "0"}, {"TORCHELASTIC_RUN_ID", "none"},
          {"TORCHELASTIC_USE_AGENT_STORE", "False"}, {"OMP_NUM_THREADS", "1"}};
      for (const auto& [k, v] : extra_env) env[k] = v;
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      int fd = open(ranks[r].log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<const char*> argv{PRISM_BINARY};
      for (const auto& a : args) argv.push_back(a.c_str());
      argv.push_back(nullptr);
      execv(PRISM_BINARY, const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    ranks[r].pid = pid;
  }
  return ranks;
}

// Waits for a rank up to `seconds`; false if it is still running.
inline bool wait_rank(Rank& r, double seconds) {
  if (r.exit_code >= 0) return true;  // reaped already: its pid may belong to another process now
  auto t0 = std::chrono::steady_clock::now();
  while (true) {
    int status = 0;
    pid_t got = waitpid(r.pid, &status, WNOHANG);
    if (got == r.pid) {
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return true;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

inline void wait_all(std::vector<Rank>& ranks, double seconds = 300) {
  for (auto& r : ranks) {
    if (!wait_rank(r, seconds)) {
      kill(r.pid, SIGKILL);
      wait_rank(r, 10);
      FAIL("a rank did not finish within " << seconds << " s; its log:\n" << r.output());
    }
  }
}




inline bool skip_without_distributed() {
  if (prism::distributed_available()) return false;
  WARN("SKIPPED: no c10d Gloo in this build (LibTorch without USE_C10D_GLOO, or gloo headers missing: "
       "apt-get install libgloo-dev and reconfigure)");
  return true;
}

}  // namespace prism::test
