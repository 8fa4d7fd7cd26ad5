#pragma once
// RunReader: read-only access to a run.h5 (run_store.h's schema) for exports,
// analyses and plots. It opens the file in SWMR-read mode, so it reads a run
// that is still training, one that was killed, and a finished one alike; each
// series is cut at len(<group>/step), the rows complete in every column.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prism/store/result_group.h"
#include "prism/store/run_store.h"

namespace prism {

// Training-time attention distance: one row per measurement.
struct AttentionSeries {
  std::vector<int64_t> step;
  std::vector<std::vector<std::vector<double>>> per_head;  // [row][layer][head]
};

struct EvalEntry {
  std::string task;
  ResultGroup values;  // acc, acc_norm, n (and what prism eval adds), with attributes
};

class RunReader {
 public:
  // `path`: a run.h5 file or a directory holding one. Throws prism::Error naming
  // the path when it is missing or not a Prism run store.
  explicit RunReader(const std::string& path);
  ~RunReader();
  RunReader(RunReader&&) noexcept;
  RunReader& operator=(RunReader&&) noexcept;

  const std::string& path() const { return path_; }  // the run.h5
  const RunAttributes& attributes() const;
  std::string status() const;

  std::vector<TrainRow> train() const;
  std::vector<ValRow> val() const;
  AttentionSeries attention() const;
  std::vector<EvalEntry> eval() const;

  // Groups written by RunStore::write_group ("attention/heldout", ...).
  bool has_group(const std::string& group) const;
  ResultGroup read_group(const std::string& group) const;  // throws prism::Error when missing
  // The names of the groups directly under `group` ("val/by_position": T128, T512, ...),
  // sorted, none half-written (".partial"); empty when `group` is missing.
  std::vector<std::string> groups_under(const std::string& group) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

// The run.h5 of a run directory, checkpoint directory or model.safetensors
// (runs/x, runs/x/checkpoints/step_000100, .../model.safetensors); "" if none.
std::string find_run_store(const std::string& path);

}  // namespace prism
