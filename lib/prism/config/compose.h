#pragma once
// Config composition with Hydra's conventions: config groups are folders of
// YAML files (experiments/model/cpu-128.yaml is option `cpu-128` of group
// `model`); a config's `defaults:` list picks group options and other files to
// merge; `key=value` overrides follow. The order, first to last, later winning:
//
//   1. the defaults list, entry by entry (each entry's own defaults first), with
//      the file's own keys where `_self_` stands; without `_self_` they come
//      last, so a file's own keys override what its defaults chose;
//   2. `+group=option` from the command line, appended after the primary's list;
//   3. key overrides in the order given: `key=value` sets (the typed config
//      rejects keys it does not know), `+key=value` adds a key that must not be
//      set yet, `++key=value` sets whether or not, `~key` removes a key (`~key=v`
//      only if it holds v);
//   4. `${a.b}` interpolation: a value that is exactly `${a.b}` becomes a copy of
//      a.b (any type); inside text it is spliced in; `\${` is a literal `${`.
//
// Defaults entries: `group: option` (null: none chosen yet), `group@pkg: option`
// (merge at another package), `override group: option` (replace a choice made by
// a nested defaults list), `_self_`, and a plain `name` (another file, relative to
// this one, `.yaml` optional). Group names inside a group option's own defaults
// are relative to its group unless they start with '/'. A group option merges at
// its group's key (`model/cpu-128.yaml` holding `preset: cpu-128` sets
// model.preset); a `# @package _global_` header merges it at the root instead,
// `# @package a.b` at a.b. On the command line `group=option` replaces a chosen
// option, `+group=option` adds a group, `~group` drops one.
//
// Groups are looked up in the directories of PRISM_CONFIG_PATH (':'-separated),
// ComposeOptions::search_path, then the primary file's directory and each of its
// parents: the first that holds a folder named after the group is its home.
// Missing groups or options, unknown override keys and type errors name the file
// and the key (KeyOrigins records which file set every key).
#include <yaml-cpp/yaml.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/config/config_node.h"

namespace prism {

// One override in Hydra's spelling.
struct Override {
  enum class Op { Set, Add, ForceSet, Remove };  // key=v, +key=v, ++key=v, ~key[=v]
  Op op = Op::Set;
  std::string key;                   // dotted key path, or a group path (model, train/optim)
  std::optional<std::string> value;  // YAML text of the value (absent for a bare ~key)
  std::string text;                  // as written, for messages
  std::string source;                // where it was given ("command line", "sweep grid", ...)
};

// Throws prism::Error for text that is not an override.
Override parse_override(const std::string& text, const std::string& source = "command line");
std::vector<Override> parse_overrides(const std::vector<std::string>& texts,
                                      const std::string& source = "command line");

struct GroupChoice {
  std::string group;    // absolute group path, "model" or "train/optim"
  std::string option;   // "cpu-128"
  std::string file;     // the file merged
  std::string package;  // where it merged ("" = root)
};

struct ComposedConfig {
  YAML::Node root;                        // merged, overridden, interpolations resolved
  std::shared_ptr<KeyOrigins> origins;    // dotted key -> where it was set
  std::vector<GroupChoice> groups;        // the chosen options, in merge order
  std::vector<std::string> files;         // every file merged, in merge order
  std::string source;                     // the primary file
};

struct ComposeOptions {
  std::vector<std::string> search_path;   // group roots searched before the file's own
  bool resolve = true;                    // resolve ${...} (false: keep them as text)
};

// Composes `path` with its defaults and the overrides (see the top of this file).
ComposedConfig compose(const std::string& path, const std::vector<Override>& overrides,
                       const ComposeOptions& options = {});
ComposedConfig compose_config(const std::string& path, const std::vector<std::string>& overrides = {},
                              const ComposeOptions& options = {});

// Applies one key override (never a group choice) to `root`, recording its origin.
void apply_key_override(YAML::Node& root, const Override& o, KeyOrigins* origins = nullptr);

// Resolves `${a.b}` references in place; errors name where the reference was written.
void resolve_interpolations(YAML::Node& root, const KeyOrigins* origins = nullptr);

// The group roots searched for a primary file at `path`, in order.
std::vector<std::string> config_search_path(const std::string& path, const ComposeOptions& options = {});

// The node at a dotted key path, or an undefined node (operator bool false) if absent.
YAML::Node lookup_key(const YAML::Node& root, const std::string& dotted);

// Splits "a.b.c" into {"a", "b", "c"}; throws for an empty part.
std::vector<std::string> split_key(const std::string& dotted, const std::string& context);

}  // namespace prism
