#pragma once
// Where `prism distance` and `prism eval` put what they measure on a
// checkpoint: the run.h5 of the run it came from, or a file the user names
// (created as a run store with the checkpoint's config and schedule).
#include <string>
#include <vector>

#include "prism/store/checkpoint_reader.h"
#include "prism/store/run_store.h"

namespace prism {

// The store for results of `checkpoint`: `out` when given, else the run's
// run.h5. Throws prism::Error (before any work is done) when there is none.
std::string result_store_path(const std::string& checkpoint, const std::string& out, const std::string& command);

// Throws prism::Error when `path` exists with another schedule than `heads`
// (so commands refuse before doing any work).
void check_result_store(const std::string& path, const std::vector<int>& heads);

// Opens `path` for adding results (creating it from the model's config when
// missing). Throws prism::Error when its schedule is not the model's.
RunStore open_result_store(const std::string& path, const LoadedModel& model);

}  // namespace prism
