#pragma once
// Internal to the data-parallel code (launcher_env.cpp, process_group.cpp): what
// its files share beyond prism/train/distributed.h. No other file includes it.

namespace prism::dist {

// The value of an environment variable, or nullptr when it is unset or empty.
const char* env(const char* name);

}  // namespace prism::dist
