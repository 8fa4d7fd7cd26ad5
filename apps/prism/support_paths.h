#pragma once
// Where the PyTorch reference scripts and their Python live: baked in at build
// time (the source tree and the venv CMake used), overridable by environment.
#include <cstdlib>
#include <string>

namespace prism::cli {

inline std::string reference_source_dir() {
  const char* env = std::getenv("PRISM_SOURCE_DIR");
  return env ? env : PRISM_SOURCE_DIR;
}

inline std::string reference_python() {
  const char* env = std::getenv("PRISM_PYTHON");
  return env ? env : PRISM_PYTHON;
}

}  // namespace prism::cli
