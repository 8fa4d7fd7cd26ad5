#pragma once
// Measures a model's DistanceProfile on held-out token windows. The distance
// comes from the model's own forward pass, stopped before the LM head: the fused
// kernel's telemetry (one extra accumulator in the online softmax) on the CPU, the
// CUDA kernel's on a GPU, the reference back end's explicit probabilities otherwise.
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prism/analysis/distance_profile.h"
#include "prism/config/attention_backend.h"
#include "prism/train/loader.h"
#include "prism/model/gpt.h"

namespace prism {

struct MeasureOptions {
  int64_t batches = 1;  // batches read from the loader (from its current position)
  int64_t bins = 8;     // query-position bins
  std::optional<attention::Backend> backend;  // the attention back end (unset: the model's)
  std::function<void(int64_t done, int64_t total)> progress;
};

// Runs the model (eval mode, no grad, on its device) on `batches` batches of
// `loader` and keeps the per-batch, per-head and per-position-bin means, and the
// per-batch, per-head means of d / i (queries i >= 1; none when T = 1). Fills
// heads, seq_len, batch, bin_edges, by_batch, by_position, normalized_by_batch
// and backend; the caller names the rest.
DistanceProfile measure_distance(GPT& model, TokenLoader& loader, const MeasureOptions& options);

// The back end(s) per layer as one label: "reference", "fused", or per layer
// ("l0-2 fused, l3-5 reference") when they differ.
std::string backends_label(const std::vector<attention::Backend>& per_layer);

}  // namespace prism
