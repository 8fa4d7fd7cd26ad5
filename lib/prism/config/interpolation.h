#pragma once
// `${a.b}` interpolation, resolved after composition and overrides: a value
// that is exactly `${a.b}` becomes a copy of a.b (any type); inside text the
// referenced value (a single one) is spliced in; `\${` is a literal `${`.
// References are absolute key paths; they resolve in any order, each once, and
// a cycle is an error.
#include <yaml-cpp/yaml.h>

#include "prism/config/config_node.h"

namespace prism {

// Resolves `${a.b}` references in place; errors name where the reference was written.
void resolve_interpolations(YAML::Node& root, const KeyOrigins* origins = nullptr);

}  // namespace prism
