#pragma once
// DistanceProfile: attention distance (docs/analysis.md, section 1) of one model on held-out
// tokens, kept per batch (for confidence intervals over batches) and per
// query-position bin (the distance grows with the query position, so a plain
// mean hides where it changes), and beside it the distance normalised by the
// query position, d / i over queries i >= 1: the share of its prefix a query
// looks back over (0 = the token itself, 1/2 = uniform attention, 1 = the first
// token), comparable across positions and context lengths. Torch-free: it is
// read back from run.h5 too.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "prism/stats/stats.h"
#include "prism/store/result_group.h"
#include "prism/store/run_reader.h"

namespace prism {

struct DistanceProfile {
  std::vector<int> heads;     // the schedule: heads per layer
  std::string source;         // the run or checkpoint it describes, for messages
  // The run's train.seed (initial weights and data order), when known: Delta D_l
  // pairs the runs of two schedules by it (distance_delta.h).
  std::optional<uint64_t> seed;
  std::string checkpoint;     // model.safetensors measured ("" for training-time rows)
  int64_t step = 0;           // its training step
  std::string data;           // the shards read
  // Identifies the held-out tokens: two profiles with the same id were measured
  // on the same tokens, the condition for comparing them batch by batch.
  std::string tokens_id;
  int64_t seq_len = 0, batch = 0;  // T and sequences per batch
  std::string backend;             // attention back end(s) that produced it
  std::vector<int64_t> bin_edges;  // query-position bins [e_k, e_k+1); n_bins + 1 entries
  std::vector<std::vector<std::vector<double>>> by_batch;     // [batch][layer][head]: mean over its queries
  std::vector<std::vector<std::vector<double>>> by_position;  // [layer][head][bin]: mean over batches, bin queries
  // [batch][layer][head]: mean of d / i over its queries i >= 1 (empty: not
  // measured, as in training-time rows and profiles of older files).
  std::vector<std::vector<std::vector<double>>> normalized_by_batch;

  size_t layers() const { return heads.size(); }
  bool has_normalized() const { return !normalized_by_batch.empty(); }
  int64_t batches() const { return static_cast<int64_t>(by_batch.size()); }
  int64_t tokens() const { return batches() * batch * seq_len; }
  std::vector<std::vector<double>> per_head() const;           // [layer][head]: mean over batches
  std::vector<double> layer_mean() const;                      // D_l: mean over heads
  std::vector<std::vector<double>> layer_by_batch() const;     // [batch][layer]
  std::vector<std::vector<double>> layer_by_position() const;  // [layer][bin]
  std::vector<Interval> layer_interval(double confidence) const;  // over batches
  // The same four for d / i (NaN, or empty, when it was not measured).
  std::vector<std::vector<double>> per_head_normalized() const;
  std::vector<double> layer_mean_normalized() const;
  std::vector<std::vector<double>> layer_by_batch_normalized() const;
  std::vector<Interval> layer_interval_normalized(double confidence) const;
};

// Equal-width query-position bins over [0, seq_len): at most `bins` of them.
std::vector<int64_t> position_bin_edges(int64_t seq_len, int64_t bins);

// The /attention/heldout layout (see docs/analysis.md) and back.
ResultGroup to_result_group(const DistanceProfile& p);
DistanceProfile profile_from_group(const ResultGroup& g, const std::vector<int>& heads, const std::string& where);

// A run's distance on held-out tokens: its /attention/heldout group when there is
// one, else (allow_training_rows) the last training-time measurement as a
// one-batch profile (no batch intervals, no positions). Throws prism::Error
// when the run has neither.
DistanceProfile read_profile(const RunReader& run, bool allow_training_rows);

// Per-layer table: layer, heads, d_h, D_l with its interval over batches, the
// normalised D_l (d / i), and the mean per position bin.
std::string format_profile_table(const DistanceProfile& p, int d_model, double confidence);

}  // namespace prism
