#include "support.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace prism::test {

Process run(const std::string& command) {
  std::string cmd = command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, out};
}

Process run_prism(const std::string& args) { return run(fmt::format("'{}' {}", PRISM_BINARY, args)); }

Killed run_prism_killed_at_checkpoint(const std::vector<std::string>& args, const std::string& run_dir, int step,
                                      int signal) {
  std::vector<std::string> argv_s{PRISM_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  Killed k;
  const pid_t pid = fork();
  if (pid < 0) return k;
  if (pid == 0) {
    execv(PRISM_BINARY, argv.data());
    _exit(127);
  }
  const std::string want = fmt::format("step_{:06d}", step), latest = run_dir + "/checkpoints/latest";
  for (int i = 0; i < 1200 && !k.saw_checkpoint; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    k.saw_checkpoint = read_file_or_empty(latest).find(want) != std::string::npos;
  }
  kill(pid, signal);
  int status = 0;
  waitpid(pid, &status, 0);
  k.by_signal = WIFSIGNALED(status);
  if (WIFEXITED(status)) k.exit_code = WEXITSTATUS(status);
  return k;
}

Process run_reference(const std::string& script, const std::string& args) {
  return run(fmt::format("'{}' '{}/test/reference/{}' {}", PRISM_PYTHON, PRISM_SOURCE_DIR, script, args));
}

TempDir::TempDir(const std::string& tag) {
  std::random_device rd;
  auto base = std::filesystem::temp_directory_path();
  for (int i = 0; i < 100; ++i) {
    auto p = base / fmt::format("{}-{:08x}", tag, rd());
    if (std::filesystem::create_directory(p)) {
      path_ = p.string();
      return;
    }
  }
  throw std::runtime_error("cannot create a temp dir");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_file_or_empty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string source_path(const std::string& relative) { return std::string(PRISM_SOURCE_DIR) + "/" + relative; }

}  // namespace prism::test
