#pragma once
// Where a model runs: the device (shared by training and the analysis commands)
// and, for a trained model that is evaluated, measured or sampled, the attention
// back end. Analysis never depends on the back end a checkpoint trained with: the
// command chooses both, and `auto` picks what runs on the chosen device.
#include <torch/torch.h>

#include <string>

#include "prism/config/attention_backend.h"

namespace prism {

// "auto" (the first GPU when LibTorch sees one, else the CPU), "cpu" or "cuda".
// Throws prism::Error naming `where` (a flag or config key) for another name, or
// for cuda on a machine where LibTorch sees no GPU.
torch::Device resolve_device(const std::string& name, const std::string& where);

struct Placement {
  torch::Device device = torch::kCPU;
  attention::Backend backend = attention::Backend::Auto;
  std::string describe() const;  // "cpu, attention auto"
};

// The --device and --backend of prism eval, distance and sample. Throws
// prism::Error (naming the flag and the fix) for an unknown name, --device cuda
// without a GPU, and a back end that cannot run on the device: cuda off a GPU or
// in a build without the CUDA back end, fused (a CPU kernel) on a GPU.
Placement resolve_placement(const std::string& device, const std::string& backend);

}  // namespace prism
