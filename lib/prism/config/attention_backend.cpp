#include "prism/config/attention_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prism/error.h"

namespace prism::attention {

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = {"auto", "reference", "sdpa", "fused", "cuda"};
  return names;
}

Backend parse_backend(const std::string& name) {
  static const Backend values[] = {Backend::Auto, Backend::Reference, Backend::Sdpa, Backend::Fused, Backend::Cuda};
  const auto& names = backend_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return values[i];
  throw Error(fmt::format("unknown attention back end '{}'", name), "attention.backend",
              fmt::format("use one of: {}", fmt::join(names, ", ")));
}

std::string backend_name(Backend b) { return backend_names().at(static_cast<size_t>(b)); }

}  // namespace prism::attention
