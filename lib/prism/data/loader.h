#pragma once
// TokenLoader: windows of B x (T+1) tokens from llm.c-format shards, as (x, y)
// pairs of (B, T) int64 tensors with y shifted by one. Deterministic given the
// seed and position; its state can be saved and restored for exact resume; and
// it knows rank / world size, so data-parallel ranks read disjoint windows.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace prism {

struct LoaderOptions {
  std::vector<std::string> shards;  // paths, in order
  int64_t batch = 8;                // B (per rank)
  int64_t seq_len = 256;            // T
  bool shuffle = true;              // random windows (train) or sequential (validation)
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
};

// Everything needed to continue exactly where a loader stopped.
struct LoaderState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t position = 0;  // batches served in this epoch (per rank)
};

class TokenLoader {
 public:
  // Throws prism::Error naming the shard for a missing, corrupt or too-short file.
  explicit TokenLoader(LoaderOptions opt);

  // The next batch: x, y both (B, T) int64 on the CPU.
  std::pair<torch::Tensor, torch::Tensor> next();

  LoaderState state() const;
  void restore(const LoaderState& s);
  void reset();  // back to the start of epoch 0 (validation passes)

  int64_t tokens() const;            // tokens in all shards
  int64_t batches_per_epoch() const; // per rank
  const LoaderOptions& options() const { return opt_; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  LoaderOptions opt_;
};

// Shards of a prepared corpus directory, by the llm.c naming (*_val_*.bin /
// *_train_*.bin; shard 0 is validation when names carry no split).
std::vector<std::string> find_shards(const std::string& dir, const std::string& split);

}  // namespace prism
