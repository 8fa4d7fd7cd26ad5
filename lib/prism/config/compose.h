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
//   3. key overrides in the order given (overrides.h: `key=value` sets,
//      `+key=value` adds, `++key=value` sets or adds, `~key` removes);
//   4. `${a.b}` interpolation (interpolation.h).
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
// Without a primary file (path ""), the overrides compose onto an empty config,
// group choices add their group (`model=cpu-128` as `+model=cpu-128`), and the
// working directory's experiments/ follows PRISM_CONFIG_PATH and the search path.
// Missing groups or options, unknown override keys and type errors name the file
// and the key (KeyOrigins records which file set every key).
//
// This file is the defaults composer; the override grammar (overrides.h) and
// the interpolation resolver (interpolation.h) are their own, and included here,
// so a user of composition includes this one header.
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "prism/config/config_node.h"
#include "prism/config/interpolation.h"
#include "prism/config/key_path.h"
#include "prism/config/overrides.h"

namespace prism {

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

// Composes `path` with its defaults and the overrides (see the top of this file);
// "" composes the overrides alone.
ComposedConfig compose(const std::string& path, const std::vector<Override>& overrides,
                       const ComposeOptions& options = {});
ComposedConfig compose_config(const std::string& path, const std::vector<std::string>& overrides = {},
                              const ComposeOptions& options = {});

// The group roots searched for a primary file at `path`, in order.
std::vector<std::string> config_search_path(const std::string& path, const ComposeOptions& options = {});

}  // namespace prism
