#pragma once
// safetensors, the format Python's `safetensors` and PyTorch load: an 8-byte
// little-endian header length, a JSON header (dtype, shape, data_offsets per
// tensor, optional string-to-string __metadata__), then the raw bytes.
#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace prism {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct Safetensors {
  NamedTensors tensors;                         // in file order
  std::map<std::string, std::string> metadata;  // __metadata__
  const torch::Tensor& at(const std::string& name) const;  // throws prism::Error naming the file
  std::string path;
};

// Writes to `path + ".tmp"`, fsyncs, then renames over `path`: a crash or a
// full disk never leaves a half-written file under the final name.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Throws prism::Error for a missing, truncated or malformed file.
Safetensors load_safetensors(const std::string& path);

// Each tensor's name and shape, from the header alone (no tensor data is read):
// a checkpoint's parameter count without loading it. Throws like load_safetensors.
std::vector<std::pair<std::string, std::vector<int64_t>>> safetensors_shapes(const std::string& path);

}  // namespace prism
