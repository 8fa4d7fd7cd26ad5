#include "prism/config/config_node.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace prism {

ConfigNode::ConfigNode(YAML::Node node, std::string source, std::string path,
                       std::shared_ptr<const KeyOrigins> origins)
    : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)), origins_(std::move(origins)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    throw Error("'" + (path_.empty() ? std::string("<root>") : path_) + "' must be a mapping of key: value, got " +
                    describe_yaml(node_),
                origins_ && origins_->count(path_) ? origins_->at(path_) : source_, "write it as `key: value` lines");
  }
}

bool ConfigNode::has(const std::string& key) const {
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

std::string ConfigNode::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

std::string ConfigNode::origin(const std::string& key) const {
  if (origins_) {
    auto it = origins_->find(key_path(key));
    if (it != origins_->end()) return it->second;
  }
  return source_;
}

std::string ConfigNode::where(const std::string& key) const {
  if (origins_ && origins_->count(key_path(key))) return origin(key) + " key " + key_path(key);
  std::string w = source_;
  if (node_ && node_.IsMap() && node_[key]) {
    auto m = node_[key].Mark();
    if (!m.is_null() && m.line >= 0) w += fmt::format(":{}", m.line + 1);
  }
  return w + " key " + key_path(key);
}

long long ConfigNode::get_int(const std::string& key, long long fallback, long long lo, long long hi) {
  long long v = get<long long>(key, fallback);
  if (v < lo || v > hi)
    throw Error(fmt::format("'{}' = {} is out of range [{}, {}]", key_path(key), v, lo, hi), where(key),
                fmt::format("choose a value between {} and {}", lo, hi));
  return v;
}

double ConfigNode::get_real(const std::string& key, double fallback, double lo, double hi) {
  double v = get<double>(key, fallback);
  if (!(v >= lo && v <= hi))
    throw Error(fmt::format("'{}' = {} is out of range [{}, {}]", key_path(key), v, lo, hi), where(key),
                fmt::format("choose a value between {} and {}", lo, hi));
  return v;
}

std::string ConfigNode::get_choice(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& choices) {
  std::string v = get<std::string>(key, fallback);
  for (const auto& c : choices)
    if (c == v) return v;
  throw Error(fmt::format("'{}' = '{}' is not one of: {}", key_path(key), v, fmt::join(choices, ", ")), where(key),
              "use one of the listed values");
}

ConfigNode ConfigNode::child(const std::string& key) {
  read_.insert(key);
  return ConfigNode(has(key) ? node_[key] : YAML::Node(YAML::NodeType::Map), source_, key_path(key), origins_);
}

YAML::Node ConfigNode::raw(const std::string& key) {
  read_.insert(key);
  return has(key) ? node_[key] : YAML::Node();
}

void ConfigNode::finish(const std::vector<std::string>& known_extra) const {
  if (!node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar())  // YAML's complex keys ("? {a: 1}: ..."): no config key is one
      throw Error(fmt::format("a key of '{}' is {}, not a name", key_path(""), describe_yaml(kv.first)), where(""),
                  "write each key as a plain name");
    std::string k = kv.first.Scalar();
    if (read_.count(k)) continue;
    bool extra = false;
    for (const auto& e : known_extra) extra = extra || e == k;
    if (extra) continue;
    std::vector<std::string> known(read_.begin(), read_.end());
    known.insert(known.end(), known_extra.begin(), known_extra.end());
    throw Error("unknown key '" + key_path(k) + "'", where(k),
                known.empty() ? "remove it" : fmt::format("remove it or use one of: {}", fmt::join(known, ", ")));
  }
}

std::string describe_yaml(const YAML::Node& n) {
  if (!n || n.IsNull()) return "nothing";
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "an unknown value";
}

}  // namespace prism
