#pragma once
// RunStore: one HDF5 file per run (run.h5), with the groups its methods below
// name (/train, /val, /attention, ...; docs/training.md reads it), appended
// and flushed as the run goes, readable by h5py while it is written.
//
// How it stays readable and crash-safe: the file uses the HDF5 1.10 format and
// SWMR mode (single writer, multiple readers). Every dataset is created up
// front (the attention layout follows from `heads`) under a temporary name that
// is renamed to `path` once complete; then appends run in SWMR mode, each row
// flushed, the data columns of a group first and its `step` column last, so
// len(<group>/step) rows are complete in every column at any moment, even after
// a SIGKILL. SWMR forbids changing attributes or adding groups, so set_status()
// and write_eval() briefly leave it (close, reopen plain, write, resume SWMR);
// a reader opening in that window gets an error and simply retries.
//
// Reading from Python, live, after a crash, or finished (one form for all):
//   with h5py.File("run.h5", "r", swmr=True) as f:
//       n = len(f["train/step"])
//       loss = f["train/loss"][:n]
// Reopen (or Dataset.refresh()) to see new rows. A plain h5py.File("run.h5")
// works once the run has closed the file; while it runs, or after a kill, HDF5
// refuses a non-SWMR open ("file is already open for write"). resume() clears
// that mark (as `h5clear -s -i run.h5` would).
//
// One writer per file: the writer holds an OFD lock on it (HDF5's own flock is
// dropped in SWMR mode) and does not take HDF5's file lock, so that readers
// holding the file open never block the end-of-run status update.
// Errors are prism::Error naming the file. After a failed write (a full disk)
// the store stops: the file keeps every row flushed before, later calls throw,
// and the run continues with resume() once the cause is fixed.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "prism/store/result_group.h"

namespace prism {

// The /search series of a weight-sharing schedule search (search/), created with
// the run; plain runs have none (slots 0). Per optimizer step:
//   /search/step (n), /search/heads (n x slots*layers: the head counts each of
//   the step's micro-batches ran with, row-major by slot), /search/weights
//   (n x layers*choices: architecture weights, row-major by layer; NaN for a
//   method without them), /search/temperature (n; NaN likewise).
// At the validation cadence: /search/scores/step (m), /search/scores/score
//   (m x layers*choices: per-layer scores of each head count, lower is better)
//   and /search/scores/choice (m x layers: each layer's best count then).
// The /search group's attributes: choices (int array), slots, layers, method.
// The ranking at the end is a result group, /search/ranking (write_group).
struct SearchLayout {
  int slots = 0;              // micro-batches per step over all ranks; 0: no /search
  int layers = 0;
  std::vector<int> choices;   // the head counts a layer chooses from
  std::string method;         // e.g. "spos", "mixture"
  bool enabled() const { return slots > 0; }
};

struct RunAttributes {
  std::string config;        // resolved YAML text
  std::vector<int> heads;    // the schedule
  uint64_t seed = 0;
  std::string prism_version;
  int world_size = 1;        // data-parallel processes (1 when an older file has no such attribute)
  // The data's unigram baseline (prepare.json), nats per token: the loss of a model
  // that ignores context. NaN when unknown (llm.c's shards) or in an older file.
  double unigram_val_loss = std::numeric_limits<double>::quiet_NaN();
  SearchLayout search{};     // a search run's /search series (read back from the file)
  // The dtype the run trained in, "fp32" or "bf16" ("" in a file from before it was
  // recorded), and why: train.dtype as given, or what `auto` measured.
  std::string dtype;
  std::string dtype_reason;
};

// The dtype a run trained in: its `dtype` attribute, else (a file from before it was
// recorded) its config's train.dtype where that names one; "" when unknown (`auto`).
std::string run_dtype(const RunAttributes& attrs);

struct TrainRow {
  int64_t step = 0;
  int64_t tokens = 0;
  double loss = 0, lr = 0, grad_norm = 0, time_s = 0;
};

struct ValRow {
  int64_t step = 0;
  int64_t tokens = 0;
  double loss = 0;
  // Standard error of `loss` over the validation set's batches: the sample sd of
  // the per-batch mean losses / sqrt(batches). Tokens within a batch are
  // correlated; batches are the honest unit. NaN with one batch, or in an older file.
  double loss_se = std::numeric_limits<double>::quiet_NaN();
};

struct SearchRow {
  int64_t step = 0;
  std::vector<int64_t> heads;    // slots x layers
  std::vector<double> weights;   // layers x choices (NaN: none)
  double temperature = std::numeric_limits<double>::quiet_NaN();
};

struct SearchScoresRow {
  int64_t step = 0;
  std::vector<double> score;     // layers x choices, lower is better
  std::vector<int64_t> choice;   // layers: the head count chosen per layer
};

class RunStore {
 public:
  // Creates `path` (status "running"); throws prism::Error if it exists.
  static RunStore create(const std::string& path, const RunAttributes& attrs);
  // Opens an existing run to continue it: rows with step > `keep_through_step`
  // (written after the checkpoint being resumed) are dropped; status -> running.
  // Works on a file left by a killed run.
  static RunStore resume(const std::string& path, int64_t keep_through_step);
  // Opens an existing run to add results (write_eval, set_status) without
  // dropping rows or changing its status.
  static RunStore open(const std::string& path);

  void append_train(const TrainRow& row);
  void append_val(const ValRow& row);
  // per_head[l][k]: mean distance of head k in layer l; D_l (the mean over
  // heads) is stored in /attention/distance, per head in /attention/layer_NN/distance.
  void append_attention(int64_t step, const std::vector<std::vector<double>>& per_head);
  // A search run's rows (RunAttributes::search); throws prism::Error for a plain run
  // or rows of the wrong width.
  void append_search(const SearchRow& row);
  void append_search_scores(const SearchScoresRow& row);
  void write_eval(const std::string& task, double acc, double acc_norm, int64_t n);
  // Writes an analysis result whole at `path` ("attention/heldout", "eval/piqa",
  // "search/ranking", "val/by_position/T1024", ...), under /attention, /eval, /val/by_position or (a search
  // run's) /search. It is built under "<path>.partial" and only then
  // replaces an older group of that name, so a failure never leaves a half-written
  // result under the real name. The schema's own series cannot be replaced.
  void write_group(const std::string& path, const ResultGroup& group);
  void set_status(const std::string& status);  // running | completed | failed
  void set_world_size(int world_size);          // a run resumed with another number of processes
  std::string status() const;
  // The root attributes as stored (read when the file was opened).
  const RunAttributes& attributes() const;

  // Closes the file; the status stays what it was (a destroyed store that was
  // never set to completed or failed reads "running", like a killed run).
  void close();
  ~RunStore();
  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;

  const std::string& path() const { return path_; }

 private:
  RunStore() = default;
  static RunStore open_existing(const std::string& path);  // locked, marks of a killed writer cleared
  struct Impl;
  Impl& open_impl() const;  // throws prism::Error once closed
  Impl* impl_ = nullptr;
  std::string path_;
};

}  // namespace prism
