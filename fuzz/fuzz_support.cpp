#include "fuzz_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace prism::fuzz {

Scratch::Scratch() {
  const std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
  std::string tmpl = base + "/prism-fuzz-XXXXXX";
  if (!::mkdtemp(tmpl.data())) finding("cannot create a scratch directory under " + base);
  dir_ = tmpl;
}

Scratch::~Scratch() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string Scratch::write(const std::string& name, std::string_view bytes) const {
  const fs::path p = fs::path(dir_) / name;
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) finding("cannot write the scratch file " + p.string());
  return p.string();
}

void Scratch::clear() const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) fs::remove_all(e.path(), ec);
}

std::string source_path(const std::string& relative) { return std::string(PRISM_SOURCE_DIR) + "/" + relative; }

}  // namespace prism::fuzz
