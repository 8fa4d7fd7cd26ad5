#pragma once
// Dotted key paths into a YAML tree ("train.lr", "model.heads.0"), and the
// record of which file or override set each key (KeyOrigins): what the override
// grammar, the defaults composer and the interpolation resolver share.
#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "prism/config/config_node.h"
#include "prism/error.h"

namespace prism {

// Splits "a.b.c" into {"a", "b", "c"}; throws prism::Error naming `context` for an empty part.
std::vector<std::string> split_key(const std::string& dotted, const std::string& context);

// "a" + "b" = "a.b"; "" + "b" = "b".
std::string join_key(const std::string& parent, const std::string& key);

// The node at a dotted key path (list items by index), or an undefined node
// (operator bool false) if absent.
YAML::Node lookup_key(const YAML::Node& root, const std::string& dotted);

// The mapping at `parts[0..n)` under root, created where absent; a non-mapping
// on the way is an error made by `fail`.
YAML::Node ensure_map_path(YAML::Node root, const std::vector<std::string>& parts, size_t n,
                           const std::function<Error(const std::string&)>& fail);

// KeyOrigins bookkeeping (each a no-op when `origins` is null): forget a key and
// everything below it; remember `where` for a key and everything below it; or
// remember each key below it at its own line of `file`.
void forget_origins(KeyOrigins* origins, const std::string& path);
void remember_origins(KeyOrigins* origins, const std::string& path, const YAML::Node& node, const std::string& where);
void remember_file_origins(KeyOrigins* origins, const std::string& path, const YAML::Node& node,
                           const std::string& file);

// "file:line" of a node (just `file` when the node has no position).
std::string mark_of(const std::string& file, const YAML::Node& node);

// Text without surrounding blanks (spaces, tabs, carriage returns).
std::string trim(const std::string& text);

}  // namespace prism
