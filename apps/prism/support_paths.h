#pragma once
// Where the PyTorch reference scripts and their Python live: baked in at build
// time (the source tree and the venv CMake used), overridable by environment.
// The built-in values come from one file CMake generates (apps/prism/CMakeLists.txt),
// so no other compile line holds a path and ccache shares the objects between checkouts.
#include <cstdlib>
#include <string>

namespace prism::cli {

extern const char* const kBuiltSourceDir;
extern const char* const kBuiltPython;

inline std::string reference_source_dir() {
  const char* env = std::getenv("PRISM_SOURCE_DIR");
  return env ? env : kBuiltSourceDir;
}

inline std::string reference_python() {
  const char* env = std::getenv("PRISM_PYTHON");
  return env ? env : kBuiltPython;
}

}  // namespace prism::cli
