#pragma once
// Overrides in Hydra's spelling, as a command line (or a sweep grid point) gives them:
//   key=value    sets a key (the typed config rejects keys it does not know)
//   +key=value   adds a key that must not be set yet
//   ++key=value  sets a key whether or not it is set
//   ~key         removes a key (`~key=v` only if it holds v)
// `value` is YAML (3e-4, [3,3,6], "text"). `group=option`, `+group=option` and
// `~group` choose config group options instead; compose.h applies those.
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "prism/config/config_node.h"
#include "prism/config/key_path.h"

namespace prism {

// One override in Hydra's spelling.
struct Override {
  enum class Op { Set, Add, ForceSet, Remove };  // key=v, +key=v, ++key=v, ~key[=v]
  Op op = Op::Set;
  std::string key;                   // dotted key path, or a group path (model, train/optim)
  std::optional<std::string> value;  // YAML text of the value (absent for a bare ~key)
  std::string text;                  // as written, for messages
  std::string source;                // where it was given ("command line", "sweep grid", ...)

  std::string where() const;         // "command line override 'train.lr=1e-3'", for messages
};

// Throws prism::Error for text that is not an override.
Override parse_override(const std::string& text, const std::string& source = "command line");
std::vector<Override> parse_overrides(const std::vector<std::string>& texts,
                                      const std::string& source = "command line");

// Applies one key override (never a group choice) to `root`, recording its origin.
void apply_key_override(YAML::Node& root, const Override& o, KeyOrigins* origins = nullptr);

}  // namespace prism
