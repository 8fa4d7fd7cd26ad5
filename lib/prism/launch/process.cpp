#include "prism/launch/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "prism/atomic_file.h"
#include "prism/error.h"

extern char** environ;

namespace fs = std::filesystem;

namespace prism {

namespace {

// This process's environment with the thread pools of OpenMP and MKL sized to `threads`.
std::vector<std::string> child_environment(int threads) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("OMP_NUM_THREADS=", 0) == 0 || kv.rfind("MKL_NUM_THREADS=", 0) == 0) continue;
    env.push_back(kv);
  }
  env.push_back(fmt::format("OMP_NUM_THREADS={}", threads));
  env.push_back(fmt::format("MKL_NUM_THREADS={}", threads));
  return env;
}

}  // namespace

namespace {

// One fork + execve of `prism`. Returns the child's pid, or -errno when execve failed (the child is
// reaped): the child reports execve's errno through a close-on-exec pipe, which a successful exec
// closes unread.
pid_t spawn_once(const std::string& prism, std::vector<char*>& argv, std::vector<char*>& envp, int log_fd, int null_fd,
                 bool own_group) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    throw Error(fmt::format("cannot start a trial process: {}", std::strerror(errno)), "prism sweep",
                "lower --jobs or raise the open-file limit");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    ::close(report[0]);
    ::close(report[1]);
    throw Error(fmt::format("cannot start a trial process: {}", std::strerror(e)), "prism sweep",
                "lower --jobs or free memory");
  }
  if (pid == 0) {  // the child: only async-signal-safe calls until execve
    ::close(report[0]);
    if (own_group) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(129);  // the launcher died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execve(prism.c_str(), argv.data(), envp.data());
    const int e = errno;
    ssize_t n = write(report[1], &e, sizeof(e));
    (void)n;
    _exit(127);
  }
  if (own_group) setpgid(pid, pid);  // also here, so a signal sent right away finds the group
  ::close(report[1]);
  int child_errno = 0;
  ssize_t got;
  do {
    got = read(report[0], &child_errno, sizeof(child_errno));
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got != static_cast<ssize_t>(sizeof(child_errno))) return pid;  // closed by a successful execve
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return -child_errno;
}

// An execve failure that passes: the binary is being rewritten (a relink replaces the file and
// holds it open for writing) or is not there yet.
bool transient_exec_error(int e) { return e == ETXTBSY || e == ENOENT || e == EACCES || e == ENOEXEC; }

}  // namespace

pid_t spawn_prism(const std::string& prism, const std::vector<std::string>& args, const std::string& log_path,
                  int threads, bool own_group, double exec_wait_s) {
  std::vector<std::string> argv_s{prism};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = child_environment(threads);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0)
    throw Error(fmt::format("cannot open the trial log: {}", std::strerror(errno)), log_path,
                "check that the sweep directory is writable");
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto close_fds = [&]() {
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                              std::chrono::duration<double>(std::max(0.0, exec_wait_s)));
  pid_t pid;
  try {
    while ((pid = spawn_once(prism, argv, envp, log_fd, null_fd, own_group)) < 0 && transient_exec_error(-pid) &&
           std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
  } catch (...) {
    close_fds();
    throw;
  }
  close_fds();
  if (pid < 0)
    throw Error(fmt::format("cannot execute {}: {}{}", prism, std::strerror(-pid),
                            transient_exec_error(-pid) ? fmt::format(" (still after {:g} s of retries)", exec_wait_s) : ""),
                "prism sweep",
                "rebuild prism if a build replaced it, or name a working binary; the finished trials are kept and "
                "rerunning the sweep continues it");
  return pid;
}

std::string self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the prism executable (/proc/self/exe)", "prism sweep", "run prism by its full path");
  // A rebuild since this process started replaced the file: the link names the old one as
  // "PATH (deleted)", and PATH is the new build.
  std::string s = p.string();
  const std::string deleted = " (deleted)";
  if (s.size() > deleted.size() && s.compare(s.size() - deleted.size(), deleted.size(), deleted) == 0)
    s.resize(s.size() - deleted.size());
  return s;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a command; returns its stdout (trimmed) or throws with its output.
std::string run_command(const std::string& cmd, const std::string& what) {
  FILE* pipe = popen(("(" + cmd + ") 2>&1").c_str(), "r");
  if (!pipe) throw Error(fmt::format("cannot run {}", what), cmd, "check that Slurm's commands are on PATH");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (status != 0)
    throw Error(fmt::format("{} failed: {}", what, out.empty() ? "no output" : out), cmd,
                "check the Slurm settings in sweep.slurm (partition, time, mem) and that sbatch works here");
  return out;
}

void write_script(const std::string& path, const std::string& text) {
  write_file_atomic(path, text);
  ::chmod(path.c_str(), 0755);
}

}  // namespace prism
