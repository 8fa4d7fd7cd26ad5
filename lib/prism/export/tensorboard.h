#pragma once
// `prism export RUN|SWEEP --tensorboard DIR`: runs as TensorBoard event files, one
// subdirectory of DIR per run (its trial name, or its run directory's name):
//   train/loss, train/lr, train/grad_norm, train/tokens_per_s   every logged step
//   val/loss, val/loss_se (its standard error over validation batches)
//   distance/layer_NN      D_l, the mean attention distance of layer NN's heads (tokens)
//   schedule, config       text: the head schedule and the resolved config
//   HParams                one row per run (schedule, heads, seed, the sweep's grid
//                          values) with its last val/loss and train/loss; a sweep also
//                          writes the experiment's hparams config into DIR itself
// store/ reads the runs; scripts/tensorboard_bridge.py writes the files with the
// tensorboard package's own writer (prism sends it JSON lines). Without `follow`
// the export goes to a temporary directory inside DIR and each run's directory is
// renamed into place at the end, so DIR never holds half an export. With `follow`
// it writes into DIR and keeps mirroring the runs (new rows, new trials of a sweep)
// every poll_s seconds until every run has finished and no sweep runner holds the
// sweep, or until SIGINT/SIGTERM; a path that holds no run yet is waited for.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "prism/store/run_reader.h"

namespace prism {

struct TensorBoardOptions {
  std::string python;  // a Python with the tensorboard package (scripts/requirements.txt)
  std::string bridge;  // scripts/tensorboard_bridge.py
  bool follow = false;
  double poll_s = 5;
  bool force = false;  // replace these runs' directories (and a sweep's hparams config) in DIR
  std::function<void(const std::string&)> log;  // a line per poll that wrote something (follow)
};

struct TensorBoardSummary {
  std::string dir;
  std::vector<std::string> runs;  // subdirectories of dir written
  int64_t events = 0;
  std::string tensorboard_version;
};

// Throws prism::Error, before writing anything, when a run's directory (or, for a
// sweep, DIR's own event files) already exists without `force`, or when the
// bridge cannot start (no tensorboard package: the fix names scripts/setup.sh).
TensorBoardSummary export_tensorboard(const std::vector<std::string>& paths, const std::string& dir,
                                      const TensorBoardOptions& options);

// What has been sent of one run: rows already written, and the clock that turns a
// row's time_s into a wall time.
struct TensorBoardCursor {
  bool started = false;
  size_t train = 0, val = 0, attention = 0;
  double wall0 = 0;  // wall time of the run's time_s = 0
  std::vector<std::pair<int64_t, double>> step_time;  // (step, time_s) of train rows sent
};

// The bridge's JSON lines for `run`'s rows past `cursor` (and, on the first call,
// its schedule, config and hparams), advancing the cursor. `index` holds the
// sweep's summary.csv columns for the run (grid values become hparams).
std::vector<std::string> tensorboard_lines(const RunReader& run, const std::string& name,
                                           const std::map<std::string, std::string>& hparam_columns,
                                           TensorBoardCursor& cursor);

}  // namespace prism
