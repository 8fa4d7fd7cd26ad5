#include "prism/machine_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "prism/atomic_file.h"

namespace prism {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

std::string machine_cache_file(const std::string& name) {
  fs::path dir;
  if (const std::string d = env_or_empty("PRISM_CACHE_DIR"); !d.empty()) dir = d;
  else if (const std::string x = env_or_empty("XDG_CACHE_HOME"); !x.empty()) dir = fs::path(x) / "prism";
  else if (const std::string h = env_or_empty("HOME"); !h.empty()) dir = fs::path(h) / ".cache" / "prism";
  else dir = fs::temp_directory_path() / fmt::format("prism-cache-uid{}", ::getuid());
  return (dir / name).string();
}

nlohmann::json read_machine_cache(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

void write_machine_cache_entry(const std::string& path, const std::string& key, nlohmann::json value) {
  nlohmann::json cache = read_machine_cache(path);
  value["measured"] = utc_now();
  cache[key] = std::move(value);
  fs::create_directories(fs::path(path).parent_path());
  const std::string mine = fmt::format("{}.{}", path, ::getpid());
  write_file_atomic(mine, cache.dump(2) + "\n");
  fs::rename(mine, path);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

}  // namespace prism
