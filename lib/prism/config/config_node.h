#pragma once
// ConfigNode: strict, typed reading of one YAML mapping. Every key read is
// remembered, so finish() can reject keys nobody asked for (typos are errors,
// not silently ignored settings). Errors name the file, line and full key path.
#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "prism/error.h"

namespace prism {

// Where each key of a composed config came from: dotted key path -> "file:line"
// (or "command line override 'a.b=v'"), so errors name the file that set it.
using KeyOrigins = std::map<std::string, std::string>;

class ConfigNode {
 public:
  // `source` names where the YAML came from (a file path, "--override", ...);
  // `path` is the dotted key path of this node from the config root ("" at root).
  // `origins` (optional) names the file of each key when the YAML was composed from several.
  ConfigNode(YAML::Node node, std::string source, std::string path = {},
             std::shared_ptr<const KeyOrigins> origins = nullptr);

  bool has(const std::string& key) const;
  template <class T> T get(const std::string& key, const T& fallback);
  template <class T> T require(const std::string& key);
  template <class T> std::optional<T> maybe(const std::string& key);
  // Integer / real with an inclusive range check.
  long long get_int(const std::string& key, long long fallback, long long lo, long long hi);
  double get_real(const std::string& key, double fallback, double lo, double hi);
  // One of `choices`.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices);

  // A nested mapping (an empty one when absent).
  ConfigNode child(const std::string& key);
  // The raw node (marks the key as read).
  YAML::Node raw(const std::string& key);

  // Throws naming the first key that was never read, with the keys that are known.
  void finish(const std::vector<std::string>& known_extra = {}) const;

  std::string where(const std::string& key) const;  // "file:line key a.b.c"
  // The file that set `key` ("file:line"), or source() when unknown.
  std::string origin(const std::string& key) const;
  std::string key_path(const std::string& key) const;
  const std::string& source() const { return source_; }
  const YAML::Node& node() const { return node_; }

 private:
  template <class T> T convert(const std::string& key, const YAML::Node& n) const;
  YAML::Node node_;
  std::string source_, path_;
  std::shared_ptr<const KeyOrigins> origins_;
  mutable std::set<std::string> read_;
};

// Human-readable name of a YAML value for error messages ("'abc'", "a list", ...).
std::string describe_yaml(const YAML::Node& n);

template <class T>
T ConfigNode::convert(const std::string& key, const YAML::Node& n) const {
  try {
    if (!n.IsScalar() && !std::is_same<T, std::vector<int>>::value &&
        !std::is_same<T, std::vector<double>>::value &&
        !std::is_same<T, std::vector<std::string>>::value) {
      throw YAML::BadConversion(n.Mark());
    }
    return n.as<T>();
  } catch (const YAML::Exception&) {
    std::string want = std::is_same<T, bool>::value           ? "true or false"
                       : std::is_integral<T>::value           ? "an integer"
                       : std::is_floating_point<T>::value     ? "a number"
                       : std::is_same<T, std::string>::value  ? "a string"
                       : std::is_same<T, std::vector<int>>::value ? "a list of integers"
                                                              : "a value of another type";
    throw Error("'" + key_path(key) + "' must be " + want + ", got " + describe_yaml(n), where(key),
                "correct the value of " + key_path(key));
  }
}

template <class T>
std::optional<T> ConfigNode::maybe(const std::string& key) {
  read_.insert(key);  // asked-for keys are the known ones, present or not
  if (!has(key)) return std::nullopt;
  return convert<T>(key, node_[key]);
}

template <class T>
T ConfigNode::get(const std::string& key, const T& fallback) {
  auto v = maybe<T>(key);
  return v ? *v : fallback;
}

template <class T>
T ConfigNode::require(const std::string& key) {
  auto v = maybe<T>(key);
  if (!v) throw Error("missing required key '" + key_path(key) + "'", source_, "add " + key_path(key) + ": <value>");
  return *v;
}

}  // namespace prism
