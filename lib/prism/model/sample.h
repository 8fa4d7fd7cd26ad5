#pragma once
// Autoregressive sampling with temperature and top-k, as nanoGPT's generate():
// the whole (cropped) context is re-run for each new token; small models only.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "prism/model/gpt.h"

namespace prism {

struct SampleOptions {
  int64_t max_new_tokens = 100;
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no top-k cut
  uint64_t seed = 0;
  int64_t stop_token = -1;   // stop after emitting this id (e.g. EOT); -1: never
  std::optional<attention::Backend> backend;  // the forward passes' attention back end (unset: the model's)
};

// Runs on the model's device. Returns the new token ids. `on_token` (optional) sees each as it is drawn.
std::vector<int64_t> sample(GPT& model, const std::vector<int64_t>& prompt, const SampleOptions& opt,
                            const std::function<void(int64_t)>& on_token = {});

}  // namespace prism
