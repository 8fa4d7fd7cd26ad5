#pragma once
// Writing a file so that a crash, a kill or a full disk never leaves a partial
// result under its final name (docs/development.md: write to a temp name, then rename).
// Plain C++ and POSIX, no LibTorch: the torch-free core uses it too.
#include <string>

namespace prism {

// Writes `bytes` to `path + ".tmp"`, fsyncs it, then renames it over `path`.
// Throws prism::Error naming the path and the OS error (e.g. no space left);
// the file that was under `path` before is then untouched.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace prism
