#pragma once
// The runs an analysis reads, from what the user names: a run.h5, a run
// directory, or a sweep directory (docs/sweeps.md: one folder per trial with its
// run.h5, and summary.csv indexing the trials). With summary.csv the trials
// are its rows (their run_dir column, the highest rung under halving) and its
// columns travel with them; without it every run.h5 below the directory is a run.
#include <map>
#include <string>
#include <vector>

namespace prism {

struct RunEntry {
  std::string name;  // trial name or run directory name: the `run` column of exports
  std::string h5;    // its run.h5 ("" for a sweep trial that has none yet)
  std::map<std::string, std::string> index;  // its summary.csv row, if any
};

struct RunSet {
  std::vector<RunEntry> runs;
  std::vector<std::string> index_columns;  // summary.csv header (all sweeps named, in order)
  std::vector<std::string> param_columns;  // grid keys: the summary.csv columns between seed and status
  bool sweep = false;  // a sweep directory was named (schedules are paired with their uniform runs)
};

// Throws prism::Error for a path that is none of the three, or a directory with no runs.
RunSet find_runs(const std::vector<std::string>& paths);

}  // namespace prism
