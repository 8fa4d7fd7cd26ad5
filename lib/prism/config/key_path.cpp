#include "prism/config/key_path.h"

#include <fmt/format.h>

#include <sstream>

namespace prism {

std::vector<std::string> split_key(const std::string& dotted, const std::string& context) {
  std::vector<std::string> parts;
  std::stringstream ss(dotted);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  if (dotted.empty() || dotted.back() == '.') parts.push_back("");
  for (const auto& p : parts)
    if (p.empty())
      throw Error(fmt::format("'{}' is not a key path (empty key part)", dotted), context,
                  "write keys as section.key, e.g. train.lr");
  return parts;
}

std::string join_key(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

YAML::Node lookup_key(const YAML::Node& root, const std::string& dotted) {
  const YAML::Node absent(YAML::NodeType::Undefined);
  std::vector<std::string> parts;
  std::stringstream ss(dotted);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  YAML::Node cur = root;
  for (const auto& p : parts) {
    if (cur.IsMap()) {
      const YAML::Node& c = cur;
      YAML::Node next = c[p];
      if (!next.IsDefined()) return absent;
      cur.reset(next);
    } else if (cur.IsSequence()) {
      size_t i = 0;
      try {
        i = std::stoul(p);
      } catch (const std::logic_error&) {
        return absent;
      }
      if (i >= cur.size()) return absent;
      YAML::Node next = cur[i];
      cur.reset(next);
    } else {
      return absent;
    }
  }
  return cur;
}

YAML::Node ensure_map_path(YAML::Node root, const std::vector<std::string>& parts, size_t n,
                           const std::function<Error(const std::string&)>& fail) {
  YAML::Node cur = root;
  std::string path;
  for (size_t i = 0; i < n; ++i) {
    path = join_key(path, parts[i]);
    YAML::Node next = cur[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[parts[i]]);
    } else if (!next.IsMap()) {
      throw fail(fmt::format("'{}' is {}, not a mapping", path, describe_yaml(next)));
    }
    cur.reset(next);  // rebinding; `cur = next` would overwrite cur's node
  }
  return cur;
}

void forget_origins(KeyOrigins* o, const std::string& path) {
  if (!o) return;
  if (path.empty()) {
    o->clear();
    return;
  }
  o->erase(path);
  const std::string prefix = path + ".";
  for (auto it = o->lower_bound(prefix); it != o->end() && it->first.compare(0, prefix.size(), prefix) == 0;)
    it = o->erase(it);
}

void remember_origins(KeyOrigins* o, const std::string& path, const YAML::Node& n, const std::string& where) {
  if (!o) return;
  if (!path.empty()) (*o)[path] = where;
  if (n.IsMap())
    for (const auto& kv : n) remember_origins(o, join_key(path, kv.first.Scalar()), kv.second, where);
}

void remember_file_origins(KeyOrigins* o, const std::string& path, const YAML::Node& n, const std::string& file) {
  if (!o) return;
  if (!path.empty()) (*o)[path] = mark_of(file, n);
  if (n.IsMap())
    for (const auto& kv : n) remember_file_origins(o, join_key(path, kv.first.Scalar()), kv.second, file);
}

std::string mark_of(const std::string& file, const YAML::Node& n) {
  const auto m = n.Mark();
  if (m.is_null() || m.line < 0) return file;
  return fmt::format("{}:{}", file, m.line + 1);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace prism
