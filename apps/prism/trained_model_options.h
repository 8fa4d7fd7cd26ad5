#pragma once
// The options every command that runs a trained model shares (eval, distance,
// sample): --device and --backend (where it runs, whatever back end it trained
// with), --threads, and the default GPT-2 vocabulary.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli.h"
#include "prism/data/tokenizer.h"
#include "prism/model/placement.h"
#include "support_paths.h"

namespace prism::cli {

// $PRISM_VOCAB, ./data/cache/gpt2.tiktoken, or the source tree's copy.
inline std::string vocab_path() {
  std::string p = default_vocab_path();
  if (std::getenv("PRISM_VOCAB") || std::filesystem::exists(p)) return p;
  return reference_source_dir() + "/data/cache/gpt2.tiktoken";
}

inline void add_trained_model_options(po::options_description& o) {
  o.add_options()
      ("device", po::value<std::string>()->default_value("auto"), "auto (a GPU when there is one) | cpu | cuda")
      ("backend", po::value<std::string>()->default_value("auto"),
       "attention back end: auto (what runs on the device; on the CPU the fused kernel, on a GPU the CUDA kernel, "
       "both with distance telemetry) | reference (explicit probabilities) | sdpa | fused | cuda")
      ("threads", po::value<int>()->default_value(0), "intra-op threads (0: all cores)");
}

// Sets the thread count and returns where the model runs. Throws prism::Error
// naming the flag for a device or back end that cannot run here.
inline Placement apply_trained_model_options(const po::variables_map& vm) {
  Placement p = resolve_placement(vm["device"].as<std::string>(), vm["backend"].as<std::string>());
  if (int t = vm["threads"].as<int>(); t > 0) torch::set_num_threads(t);
  return p;
}

}  // namespace prism::cli
