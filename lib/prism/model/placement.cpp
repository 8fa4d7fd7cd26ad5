#include "prism/model/placement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "prism/error.h"

namespace prism {

torch::Device resolve_device(const std::string& name, const std::string& where) {
  if (name != "auto" && name != "cpu" && name != "cuda")
    throw Error(fmt::format("unknown device '{}'", name), where, "use auto, cpu or cuda");
  const bool gpu = torch::cuda::is_available();
  if (name == "cuda" && !gpu)
    throw Error("cuda was asked for and no CUDA device is available", where,
                fmt::format("set {} to cpu or auto, or run on a machine with a GPU and a CUDA build of LibTorch", where));
  if (name == "cuda" || (name == "auto" && gpu)) return torch::Device(torch::kCUDA, 0);
  return torch::Device(torch::kCPU);
}

std::string Placement::describe() const {
  return fmt::format("{}, attention {}", device.str(), attention::backend_name(backend));
}

Placement resolve_placement(const std::string& device, const std::string& backend) {
  const auto& names = attention::backend_names();
  if (std::find(names.begin(), names.end(), backend) == names.end())
    throw Error(fmt::format("unknown attention back end '{}'", backend), "--backend",
                fmt::format("use one of: {}", fmt::join(names, ", ")));
  Placement p;
  p.device = resolve_device(device, "--device");
  p.backend = attention::parse_backend(backend);
  const std::string on = p.device.str();
  if (p.backend == attention::Backend::Cuda) {
#ifndef PRISM_WITH_CUDA
    throw Error("attention back end 'cuda' is not in this build", "--backend",
                "use --backend auto (it picks what runs on the device), or a build with the CUDA back end");
#else
    if (!p.device.is_cuda())
      throw Error(fmt::format("attention back end 'cuda' runs on a GPU and the device is {}", on), "--backend",
                  "use --backend auto (or reference, sdpa, fused) on the CPU, or --device cuda on a GPU machine");
#endif
  }
  if (p.backend == attention::Backend::Fused && p.device.is_cuda())
    throw Error(fmt::format("attention back end 'fused' is a CPU kernel and the device is {}", on), "--backend",
                "use --backend auto (the CUDA kernel where it runs) on a GPU, or --device cpu");
  return p;
}

}  // namespace prism
