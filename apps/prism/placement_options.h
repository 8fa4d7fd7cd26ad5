#pragma once
// The --device and --backend options of the commands that run a trained model
// (eval, distance, sample): where it runs, whatever back end it trained with.
#include <string>

#include "cli.h"
#include "prism/model/placement.h"

namespace prism::cli {

inline void add_placement_options(po::options_description& o) {
  o.add_options()
      ("device", po::value<std::string>()->default_value("auto"), "auto (a GPU when there is one) | cpu | cuda")
      ("backend", po::value<std::string>()->default_value("auto"),
       "attention back end: auto (what runs on the device; on the CPU the fused kernel, on a GPU the CUDA kernel, "
       "both with distance telemetry) | reference (explicit probabilities) | sdpa | fused | cuda");
}

// Throws prism::Error naming the flag for a name or pair that cannot run here.
inline Placement placement_from_options(const po::variables_map& vm) {
  return resolve_placement(vm["device"].as<std::string>(), vm["backend"].as<std::string>());
}

}  // namespace prism::cli
