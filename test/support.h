#pragma once
// Helpers shared by tests: temp dirs, running the prism binary and Python
// reference scripts, reading whole files.
#include <string>
#include <vector>

#include "test_paths.h"

namespace prism::test {

struct Process {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs a shell command, capturing its output.
Process run(const std::string& command);
// Runs `prism <args>`.
Process run_prism(const std::string& args);
// Runs a script under test/reference/ with the configured Python; fails the test
// (does not skip) if Python or torch is missing.
Process run_reference(const std::string& script, const std::string& args);

// Starts `prism <args>` in the background and sends it `signal` (kill -9 by default) as soon as
// RUN_DIR/checkpoints/latest names step `step`'s checkpoint (polling for up to 30 s), then waits for it.
struct Killed {
  bool saw_checkpoint = false;  // the checkpoint appeared before the process was signalled
  bool by_signal = false;       // the process died of the signal (it had not finished)
  int exit_code = -1;           // its exit status when it exited (a handled signal)
};
Killed run_prism_killed_at_checkpoint(const std::vector<std::string>& args, const std::string& run_dir, int step,
                                      int signal = 9);

// A fresh directory under the system temp dir, removed when destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "prism-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path);
std::string read_file_or_empty(const std::string& path);  // "" if missing
void write_file(const std::string& path, const std::string& text);
std::string source_path(const std::string& relative);  // path under the repository root

}  // namespace prism::test
