#pragma once
// RunStore: one HDF5 file per run (run.h5), with the schema of DESIGN.md,
// appended and flushed as the run goes, readable by h5py while it is written.
#include <cstdint>
#include <string>
#include <vector>

namespace prism {

struct RunAttributes {
  std::string config;        // resolved YAML text
  std::vector<int> heads;    // the schedule
  uint64_t seed = 0;
  std::string prism_version;
};

struct TrainRow {
  int64_t step = 0;
  int64_t tokens = 0;
  double loss = 0, lr = 0, grad_norm = 0, time_s = 0;
};

struct ValRow {
  int64_t step = 0;
  int64_t tokens = 0;
  double loss = 0;
};

class RunStore {
 public:
  // Creates `path` (status "running"); throws prism::Error if it exists.
  static RunStore create(const std::string& path, const RunAttributes& attrs);
  // Opens an existing run to continue it: rows with step > `keep_through_step`
  // (written after the checkpoint being resumed) are dropped; status -> running.
  static RunStore resume(const std::string& path, int64_t keep_through_step);

  void append_train(const TrainRow& row);
  void append_val(const ValRow& row);
  // per_head[l][k]: mean distance of head k in layer l; D_l (the mean over
  // heads) is stored in /attention/distance, per head in /attention/layer_NN/distance.
  void append_attention(int64_t step, const std::vector<std::vector<double>>& per_head);
  void write_eval(const std::string& task, double acc, double acc_norm, int64_t n);
  void set_status(const std::string& status);  // running | completed | failed
  std::string status() const;

  void close();
  ~RunStore();
  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;

  const std::string& path() const { return path_; }

 private:
  RunStore() = default;
  struct Impl;
  Impl* impl_ = nullptr;
  std::string path_;
};

}  // namespace prism
