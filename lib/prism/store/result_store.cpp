#include "prism/store/result_store.h"

#include <fmt/format.h>

#include <filesystem>

#include "prism/error.h"
#include "prism/store/run_reader.h"

namespace prism {

std::string result_store_path(const std::string& checkpoint, const std::string& out, const std::string& command) {
  if (!out.empty()) return out;
  std::string found = find_run_store(checkpoint);
  if (found.empty())
    throw Error("the checkpoint is not inside a run directory (no run.h5 next to it)", checkpoint,
                fmt::format("pass --out FILE.h5 to write the results of {} to a file of their own", command));
  return found;
}

namespace {
void require_heads(const std::string& path, const std::vector<int>& stored, const std::vector<int>& heads) {
  if (stored != heads)
    throw Error(fmt::format("the run store's schedule is [{}], the checkpoint's [{}]", fmt::join(stored, ","),
                            fmt::join(heads, ",")),
                path, "write the results to the run the checkpoint belongs to, or to a new file with --out");
}
}  // namespace

void check_result_store(const std::string& path, const std::vector<int>& heads) {
  if (std::filesystem::exists(path)) require_heads(path, RunReader(path).attributes().heads, heads);
}

RunStore open_result_store(const std::string& path, const LoadedModel& model) {
  const auto& heads = model.config.schedule.heads();
  if (!std::filesystem::exists(path)) {
    RunStore store = RunStore::create(path, RunAttributes{to_yaml(model.config), heads, model.config.train.seed,
                                                          PRISM_VERSION});
    store.set_status("completed");  // a result file: no training will ever append to it
    return store;
  }
  RunStore store = RunStore::open(path);
  require_heads(path, store.attributes().heads, heads);
  return store;
}

}  // namespace prism
