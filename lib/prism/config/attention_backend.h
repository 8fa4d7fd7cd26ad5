#pragma once
// Attention back end names, kept free of LibTorch so config code can check them.
#include <string>
#include <vector>

namespace prism::attention {

enum class Backend { Auto, Reference, Sdpa, Fused, Cuda };

Backend parse_backend(const std::string& name);  // throws prism::Error
std::string backend_name(Backend b);
// Names accepted by parse_backend, for help texts and config checks.
const std::vector<std::string>& backend_names();

}  // namespace prism::attention
