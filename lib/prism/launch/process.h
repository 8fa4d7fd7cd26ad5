#pragma once
// Starting processes: the one place in lib/ that forks, execs or runs a shell
// (test_layout holds that). A local sweep's trials and post-processing steps are
// `prism` children (spawn_prism); Slurm's commands (sbatch, scontrol, squeue) run
// through run_command; job scripts are written by write_script.
#include <sys/types.h>

#include <string>
#include <vector>

namespace prism {

// The path of the running executable (after a rebuild replaced it, the path of the new build).
std::string self_executable();

// Starts `prism args...` as a child process (what every launched run is): its
// stdout and stderr appended to `log_path`, stdin from /dev/null, OpenMP and MKL
// sized to `threads`, SIGTERM when this process dies, in a process group of its
// own when `own_group`. Returns its pid once `prism` is executing. A binary that cannot be
// executed for a moment (a build relinking it: busy, missing or half-written) is retried for up
// to `exec_wait_s`, so a sweep survives a rebuild of the prism it runs; throws prism::Error when
// it cannot start, naming the reason (execve's errno).
pid_t spawn_prism(const std::string& prism, const std::vector<std::string>& args, const std::string& log_path,
                  int threads, bool own_group, double exec_wait_s = 120);

// Runs a shell command; returns its stdout and stderr (trimmed), or throws prism::Error
// naming `what` with its output when it exits non-zero.
std::string run_command(const std::string& cmd, const std::string& what);

// 'text' for a POSIX shell (single quotes, a ' inside as '\'').
std::string shell_quote(const std::string& s);

// Writes a script atomically and makes it executable.
void write_script(const std::string& path, const std::string& text);

}  // namespace prism
