#include "prism/post/post_record.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "prism/atomic_file.h"
#include "prism/error.h"

namespace fs = std::filesystem;

namespace prism {

PostRecord read_post_record(const std::string& run_dir) {
  PostRecord r;
  const std::string path = (fs::path(run_dir) / "post.json").string();
  std::ifstream in(path);
  if (!in) return r;
  std::stringstream text;
  text << in.rdbuf();
  try {
    auto j = nlohmann::json::parse(text.str());
    for (const auto& item : j.at("steps").items()) {
      const auto& v = item.value();
      r.steps[item.key()] = {v.value("status", ""), v.value("key", ""), v.value("message", ""),
                             v.value("wall_s", 0.0), v.value("finished", "")};
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("the post-processing record is not readable ({})", e.what()), path,
                "delete it; the next post-processing run redoes that trial's steps");
  }
  return r;
}

void write_post_record(const std::string& run_dir, const PostRecord& record) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::object();
  for (const auto& [name, s] : record.steps)
    steps[name] = {{"status", s.status}, {"key", s.key}, {"message", s.message}, {"wall_s", s.wall_s},
                   {"finished", s.finished}};
  write_file_atomic((fs::path(run_dir) / "post.json").string(), nlohmann::ordered_json{{"steps", steps}}.dump(2) + "\n");
}

}  // namespace prism
