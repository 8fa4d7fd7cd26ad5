#pragma once
// Measures a model's DistanceProfile on held-out token windows. The distance
// comes from the attention back end the model is set to: the fused kernel's
// telemetry (one extra accumulator in the online softmax) when it runs, the
// reference back end's explicit probabilities otherwise.
#include <torch/torch.h>

#include <functional>
#include <string>

#include "prism/analysis/distance_profile.h"
#include "prism/data/loader.h"
#include "prism/model/gpt.h"

namespace prism {

struct MeasureOptions {
  int64_t batches = 1;  // batches read from the loader (from its current position)
  int64_t bins = 8;     // query-position bins
  std::function<void(int64_t done, int64_t total)> progress;
};

// Runs the model (eval mode, no grad) on `batches` batches of `loader` and keeps
// the per-batch, per-head and per-position-bin means. Fills heads, seq_len,
// batch, bin_edges, by_batch, by_position and backend; the caller names the rest.
DistanceProfile measure_distance(GPT& model, TokenLoader& loader, const MeasureOptions& options);

// Per layer (B, h_l, T) distances of one batch: the blocks only, no LM head
// (same result as model->forward(idx, {}, true).distance, without the logits).
std::vector<torch::Tensor> layer_distances(GPT& model, const torch::Tensor& idx);

// The back end(s) the model's attention options resolve to for this shape:
// "reference", "fused", or per layer ("l0-2 fused, l3-5 reference") when mixed.
std::string resolved_backends(GPT& model, int64_t seq_len);

}  // namespace prism
