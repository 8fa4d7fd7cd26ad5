#include "prism/post/post_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "prism/config/config.h"
#include "prism/config/config_node.h"
#include "prism/error.h"
#include "prism/eval/tasks.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

std::string resolve(const std::string& dir, const std::string& path) {
  if (path.empty()) return path;
  fs::path p(path);
  if (p.is_relative() && !dir.empty()) p = fs::path(dir) / p;
  return fs::absolute(p).lexically_normal().string();
}

void read_tasks(ConfigNode tasks, const std::string& task_dir, PostSettings& s) {
  if (!tasks.node().IsMap() && !tasks.node().IsNull() && tasks.node().IsDefined())
    throw Error("'tasks' must map task names to their files", tasks.source(),
                "write tasks: {hellaswag: {data: FILE}, ...}");
  for (const auto& entry : tasks.node()) {
    const std::string name = entry.first.as<std::string>();
    try {
      parse_task(name);
    } catch (const Error& e) {
      throw Error(e.what_part(), tasks.where(name), e.fix());
    }
    ConfigNode t = tasks.child(name);
    PostTask pt;
    pt.task = name;
    pt.data = resolve(task_dir, t.require<std::string>("data"));
    pt.labels = resolve(task_dir, t.get<std::string>("labels", ""));
    t.finish();
    s.tasks.push_back(pt);
  }
}

void read_distance(ConfigNode& root, PostSettings& s) {
  if (!root.has("distance")) return;
  YAML::Node d = root.node()["distance"];
  if (d.IsScalar()) {
    s.distance = root.get<bool>("distance", true);
    return;
  }
  ConfigNode n = root.child("distance");
  s.distance = n.get<bool>("enabled", true);
  s.distance_data = resolve("", n.get<std::string>("data", ""));
  s.distance_tokens = n.get_int("tokens", s.distance_tokens, 1, int64_t{1} << 40);
  s.distance_batch = n.get_int("batch", s.distance_batch, 1, 1 << 20);
  s.distance_bins = n.get_int("bins", s.distance_bins, 1, 1 << 20);
  s.distance_seq_len = n.get_int("seq_len", s.distance_seq_len, 0, 1 << 24);
  n.finish();
}

void read_slurm(ConfigNode sl, PostSettings& s) {
  for (const char* key : {"partition", "time", "mem", "account"})
    if (auto v = sl.maybe<std::string>(key)) {
      s.slurm_keys.push_back(key);
      std::string& field = std::string(key) == "partition" ? s.slurm.partition
                           : std::string(key) == "time"    ? s.slurm.time
                           : std::string(key) == "mem"     ? s.slurm.mem
                                                           : s.slurm.account;
      field = *v;
    }
  if (sl.has("cpus_per_task")) {
    s.slurm.cpus_per_task = static_cast<int>(sl.get_int("cpus_per_task", 0, 0, 4096));
    s.slurm_keys.push_back("cpus_per_task");
  }
  if (sl.has("extra")) {
    s.slurm.extra = sl.get<std::vector<std::string>>("extra", {});
    s.slurm_keys.push_back("extra");
  }
  sl.finish();
}

}  // namespace

PostSettings load_post_settings(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node root = load_yaml_file(path);
  if (!root.IsMap() && !root.IsNull())
    throw Error("a post file is a mapping of settings", path, "see experiments/study/post/paper.yaml for its keys");
  for (const auto& o : overrides) apply_override(root, o);
  ConfigNode n(root, path);
  PostSettings s;
  s.source = path;
  const std::string task_dir = resolve("", n.get<std::string>("task_dir", ""));
  read_tasks(n.child("tasks"), task_dir, s);
  ConfigNode eval = n.child("eval");
  s.limit = eval.get_int("limit", 0, 0, int64_t{1} << 40);
  s.batch_tokens = eval.get_int("batch_tokens", 0, 0, int64_t{1} << 40);
  eval.finish();
  read_distance(n, s);
  s.device = n.get_choice("device", "auto", {"auto", "cpu", "cuda"});
  s.backend = n.get_choice("backend", "auto", {"auto", "reference", "sdpa", "fused", "cuda"});
  s.threads = static_cast<int>(n.get_int("threads", 0, 0, 4096));
  read_slurm(n.child("slurm"), s);
  n.finish();
  if (s.tasks.empty() && !s.distance)
    throw Error("the post file asks for nothing: no tasks and no distance", path,
                "name tasks under tasks: or leave distance on");
  return s;
}

void check_post_files(const PostSettings& s) {
  std::vector<std::string> missing;
  for (const auto& t : s.tasks) {
    if (!fs::is_regular_file(t.data)) missing.push_back(fmt::format("{} file {}", t.task, t.data));
    if (!t.labels.empty() && !fs::is_regular_file(t.labels))
      missing.push_back(fmt::format("{} labels {}", t.task, t.labels));
  }
  if (s.distance && !s.distance_data.empty() && !fs::exists(s.distance_data))
    missing.push_back(fmt::format("distance data {}", s.distance_data));
  if (!missing.empty())
    throw Error(fmt::format("missing: {}", fmt::join(missing, "; ")), s.source,
                "put the public task files there (docs/analysis.md says where to get them), point task_dir= at "
                "them, or drop the task from tasks:");
}

std::string post_settings_yaml(const PostSettings& s) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "tasks" << YAML::Value << YAML::BeginMap;
  for (const auto& t : s.tasks) {
    out << YAML::Key << t.task << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "data" << YAML::Value
        << t.data;
    if (!t.labels.empty()) out << YAML::Key << "labels" << YAML::Value << t.labels;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  out << YAML::Key << "eval" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "limit" << YAML::Value
      << s.limit << YAML::Key << "batch_tokens" << YAML::Value << s.batch_tokens << YAML::EndMap;
  out << YAML::Key << "distance" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "enabled"
      << YAML::Value << s.distance << YAML::Key << "data" << YAML::Value << s.distance_data << YAML::Key << "tokens"
      << YAML::Value << s.distance_tokens << YAML::Key << "batch" << YAML::Value << s.distance_batch << YAML::Key
      << "bins" << YAML::Value << s.distance_bins << YAML::Key << "seq_len" << YAML::Value << s.distance_seq_len
      << YAML::EndMap;
  out << YAML::Key << "device" << YAML::Value << s.device;
  out << YAML::Key << "backend" << YAML::Value << s.backend;
  out << YAML::Key << "threads" << YAML::Value << s.threads;
  if (!s.slurm_keys.empty()) {
    out << YAML::Key << "slurm" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& k : s.slurm_keys) {
      out << YAML::Key << k << YAML::Value;
      if (k == "partition") out << s.slurm.partition;
      else if (k == "time") out << s.slurm.time;
      else if (k == "mem") out << s.slurm.mem;
      else if (k == "account") out << s.slurm.account;
      else if (k == "cpus_per_task") out << s.slurm.cpus_per_task;
      else out << YAML::Flow << s.slurm.extra;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string("# post-processing settings, resolved (prism sweep DIR --post FILE)\n") + out.c_str() + "\n";
}

SlurmSettings post_slurm(const PostSettings& s, const SlurmSettings& sweep) {
  SlurmSettings out = sweep;
  for (const auto& k : s.slurm_keys) {
    if (k == "partition") out.partition = s.slurm.partition;
    else if (k == "time") out.time = s.slurm.time;
    else if (k == "mem") out.mem = s.slurm.mem;
    else if (k == "account") out.account = s.slurm.account;
    else if (k == "cpus_per_task") out.cpus_per_task = s.slurm.cpus_per_task;
    else if (k == "extra") out.extra = s.slurm.extra;
  }
  return out;
}

}  // namespace prism
