#pragma once
// Validation loss by query position: how much a model gains from context, and
// (measured at a longer context than it trained on) how far its positions
// extrapolate. Tokens are pooled into buckets of positions that double in width,
// [0,1) [1,2) [2,4) ... [2^k, T), so that the first tokens (which see little or no
// context) and the last ones (which see the most) are each resolved. Stored whole in
// run.h5 under /val/by_position/T<context>: at the end of training (the run's own
// validation windows) and by `prism eval --position-loss` (any context).
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prism/config/attention_backend.h"
#include "prism/model/gpt.h"
#include "prism/store/result_group.h"
#include "prism/train/execution.h"
#include "prism/train/loader.h"

namespace prism {

struct PositionLoss {
  int64_t context = 0;          // T of the windows measured
  int64_t trained_context = 0;  // the run's train.seq_len (positions at or past it never trained)
  int64_t block_size = 0;       // the model's
  std::string position;         // learned | rope
  int64_t step = 0;
  int64_t batch = 0;            // sequences per batch (batches are the unit of the intervals)
  std::vector<int64_t> bucket_edges;  // buckets + 1 edges: bucket b holds positions [edges[b], edges[b+1])
  std::vector<double> by_batch;       // batches x buckets, row-major: each batch's mean loss per bucket
  std::string dtype;                  // what the LM head ran in: fp32 | bf16 autocast
  std::string backend, checkpoint, data, tokens_id, source;
  std::vector<int> heads;

  int64_t buckets() const { return bucket_edges.empty() ? 0 : static_cast<int64_t>(bucket_edges.size()) - 1; }
  int64_t batches() const { return buckets() ? static_cast<int64_t>(by_batch.size()) / buckets() : 0; }
  // Per bucket: the mean over batches (every batch holds the same positions, so
  // this is the mean over the bucket's tokens), and its standard error over batches.
  std::vector<double> loss() const;
  std::vector<double> loss_se() const;
  // The mean over every position (the validation loss of these windows).
  double overall() const;
};

// [0, 1, 2, 4, ..., 2^k, T]: edges of buckets that double in width up to T.
std::vector<int64_t> position_bucket_edges(int64_t T);

struct PositionLossOptions {
  int64_t batches = 1;                        // read from the loader's current position
  std::optional<attention::Backend> backend;  // unset: the model's
  const Execution* execution = nullptr;       // bf16 autocast around each forward as it says (unset: fp32)
  std::function<void(int64_t done, int64_t total)> progress;
};

// Runs the model (eval mode, no grad, on its device) on `batches` batches of
// `loader` and keeps each batch's mean loss per bucket. Fills context, batch,
// bucket_edges, by_batch, backend and heads; the caller names the rest. Throws
// prism::Error for a window longer than a model with learned positions can run
// (its block_size).
PositionLoss measure_position_loss(GPT& model, TokenLoader& loader, const PositionLossOptions& options);

// A bucket's positions [lo, hi) as tables print them: "0", "2-3", "512-1023".
std::string position_bucket_label(int64_t lo, int64_t hi);

// The run.h5 group name of a context: "val/by_position/T1024".
std::string position_loss_group(int64_t context);
ResultGroup to_result_group(const PositionLoss& p);
// Throws prism::Error naming `where` for a group that is not a position loss.
PositionLoss position_loss_from_group(const ResultGroup& g, const std::string& where);

// The table: one line per bucket (positions, tokens, loss, its SE over batches, the
// change from position 0), a mark on buckets at or past the trained context.
std::string format_position_loss_table(const PositionLoss& p);

}  // namespace prism
