#pragma once
// `prism eval --position-loss` as one library call: a checkpoint's validation loss by
// query position (train/position_loss.h) on held-out windows of any context, the
// trained one or longer (length extrapolation: learned positions against RoPE),
// stored in its run.h5 under /val/by_position/T<context>.
#include <cstdint>
#include <functional>
#include <string>

#include "prism/model/placement.h"
#include "prism/train/position_loss.h"

namespace prism {

struct PositionLossRequest {
  std::string checkpoint;  // run dir, checkpoint dir or model.safetensors
  std::string data;        // prepared corpus dir (its validation shards) or one shard; "": the run's data.dir
  int64_t context = 0;     // window T; 0: the run's train.seq_len
  int64_t tokens = 131072; // held-out tokens to read (whole batches)
  int64_t batch = 0;       // sequences per batch; 0: max(1, 8192 / context)
  std::string out;         // this HDF5 file instead of the run's run.h5
  bool store = true;       // false: print only
  Placement placement;
  std::function<void(const std::string&)> print;  // the table and where it went (stdout)
  std::function<void(const std::string&)> note;   // remarks (stderr)
  std::function<void(int64_t done, int64_t total)> progress;
};

// Loads the checkpoint onto request.placement (fp32), measures it, stores the group
// and returns it. Throws prism::Error naming the option and the fix: no data, a
// context a model with learned positions cannot run, fewer tokens than one batch.
PositionLoss evaluate_position_loss(const PositionLossRequest& request);

}  // namespace prism
