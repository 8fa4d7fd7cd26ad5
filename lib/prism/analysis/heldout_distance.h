#pragma once
// `prism distance` as one library call: every checkpoint measured on the same
// held-out windows (docs/analysis.md, section 1), its DistanceProfile stored under
// /attention/heldout of its run.h5 and, with baseline runs, Delta D_l stored under
// /attention/delta of each Prism run.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prism/analysis/distance_delta.h"
#include "prism/analysis/distance_profile.h"
#include "prism/model/placement.h"
#include "prism/train/loader.h"

namespace prism {

struct HeldOutRequest {
  std::vector<std::string> checkpoints;  // the runs to measure (Prism, or any)
  std::vector<std::string> baselines;    // uniform baseline runs: also Delta D_l
  std::string data;                      // prepared corpus directory (its validation shards) or one shard file
  int64_t tokens = 65536;                // held-out tokens to read (whole batches)
  int64_t seq_len = 0;                   // window T; 0: the run's train.seq_len, else its model.block_size
  int64_t batch = 8;                     // sequences per batch (the unit of the batch intervals)
  int64_t bins = 8;                      // query-position bins
  double confidence = 0.95;              // of the printed and stored intervals
  std::string out;                       // one checkpoint only: this HDF5 file instead of the run's run.h5
  Placement placement;                   // device and attention back end (never the checkpoint's own)
  std::function<void(const std::string&)> print;  // the tables and where results went (stdout)
  std::function<void(const std::string&)> note;   // remarks such as a short held-out set (stderr)
  std::function<void(const std::string& run, int64_t done, int64_t total)> progress;  // batches measured
};

struct HeldOutResult {
  std::vector<DistanceProfile> prism, baseline;  // in the order given
  std::vector<std::string> stores;               // where each profile went, Prism runs first
  std::optional<DistanceDelta> delta;            // with baselines
};

// The held-out shards of `data`: a prepared corpus directory (its validation shards,
// find_shards' errors when there are none) or one shard file.
std::vector<std::string> held_out_shards(const std::string& data);

// Identifies the windows read: shard names and sizes (the loader's fingerprint) and the
// shape, "name,...|fingerprint|batches x B x T".
std::string held_out_tokens_id(const std::vector<std::string>& shards, const TokenLoader& loader, int64_t batches);

// Loads each checkpoint once (onto request.placement) and measures it; writes
// nothing until every run is measured and its destination checked, so a bad
// request or a failure part-way leaves every run.h5 as it was. Throws
// prism::Error naming the option or file and the fix: no checkpoints or data,
// non-positive counts, --out with several checkpoints, a destination of another
// schedule, a window longer than a model's context, fewer held-out tokens than a batch.
HeldOutResult measure_heldout(const HeldOutRequest& request);

}  // namespace prism
