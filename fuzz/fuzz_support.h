#pragma once
// Shared by the harnesses. The contract every reader of outside data keeps:
// bad input ends in prism::Error, whose message names the thing, the place and
// the fix (the CLI prints it as one line). Anything else -- another exception,
// an Error without a place or a fix, a crash, a hang, a sanitizer report -- is
// a finding, and the harness aborts so that libFuzzer keeps the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "prism/error.h"

namespace prism::fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n==prism-fuzz== finding: %s\n", what.c_str());
  std::abort();
}

// Runs `body`; a prism::Error is the expected outcome of bad input.
template <class F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.where().empty() || e.fix().empty())
      finding(std::string("prism::Error without a place or a fix: ") + e.what());
  } catch (const std::exception& e) {
    finding(std::string("an exception other than prism::Error escaped: ") + e.what());
  }
}

// A private directory for the files an input becomes (readers take paths),
// under /dev/shm when it exists so that files cost no disk I/O; removed at exit.
class Scratch {
 public:
  Scratch();
  ~Scratch();
  const std::string& dir() const { return dir_; }
  // Writes `bytes` to dir/name (creating subfolders) and returns the path.
  std::string write(const std::string& name, std::string_view bytes) const;
  // Removes everything inside dir.
  void clear() const;

 private:
  std::string dir_;
};

// The repository root, for the real files some harnesses read (PRISM_SOURCE_DIR).
std::string source_path(const std::string& relative);

}  // namespace prism::fuzz
