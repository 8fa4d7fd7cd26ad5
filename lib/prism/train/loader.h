#pragma once
// TokenLoader: windows of B x (T+1) tokens from llm.c-format shards, as (x, y)
// pairs of (B, T) int64 tensors with y shifted by one. Deterministic given the
// seed and position; its state can be saved and restored for exact resume; and
// it knows rank / world size, so data-parallel ranks read disjoint windows.
//
// The scheme. Each shard of n tokens holds floor((n - 1) / T) windows, window k
// being tokens [k*T, k*T + T] (T+1 tokens: x is the first T, y the last T), so
// consecutive windows share one token, as llm.c reads them; windows never cross
// a shard boundary. All windows of all shards are numbered 0..W-1 in shard
// order. An epoch is an order of those numbers: the identity (sequential) or a
// Fisher-Yates shuffle driven by splitmix64 seeded from (seed, epoch), written
// out here so it is the same with every compiler and standard library. A global
// step takes the next G = B * world_size numbers of the order; rank r takes
// numbers [r*B, (r+1)*B) of them. So ranks are disjoint, and their union at a
// step is, row for row, the batch a single process with world_size 1 and batch
// B * world_size reads at that step. With gradient accumulation (`accum`
// micro-batches per optimizer step) an epoch is floor(W / (G * accum)) optimizer
// steps, so it ends on a step boundary whatever the split of the step's
// G * accum windows into ranks and micro-batches: runs with the same global
// batch read the same windows at every step, and a saved position carries over
// to another world size. The windows left over are not read in that epoch
// (others are in the next, when shuffling).
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
  int64_t accum = 1;                // micro-batches per optimizer step (an epoch is whole steps)
  // The model's vocabulary: next() throws prism::Error naming the shard and the
  // offset of a token id >= vocab_size (checked as each window is copied, at no
  // measurable cost). 0: no check.
  int64_t vocab_size = 0;
};

// Everything needed to continue exactly where a loader stopped.
struct LoaderState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t position = 0;  // batches served in this epoch (per rank)
  // Digest of the data and shape (token counts, T, windows per optimizer step
  // B * world_size * accum, shuffle) the state belongs to; restore() refuses a
  // state of other data or shape. 0 skips the check.
  uint64_t fingerprint = 0;
  // Windows one position spans over all ranks (B * world_size) when saved, so
  // restore() can carry the position to another split of the same global
  // batch. 0: the same split as the restoring loader.
  uint64_t batch_windows = 0;
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
  int64_t windows() const;           // W: windows of T+1 tokens in all shards
  const LoaderOptions& options() const { return opt_; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  LoaderOptions opt_;
};

// Shards of a prepared corpus directory, by the llm.c naming (*_val_*.bin /
// *_train_*.bin, or *_val.bin / *_train.bin; shard 0 is validation when names
// carry no split), sorted by
// name. `split` is "train" or "val". Throws prism::Error when the directory or
// the split has no shards.
std::vector<std::string> find_shards(const std::string& dir, const std::string& split);

}  // namespace prism
