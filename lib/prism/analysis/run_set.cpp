#include "prism/analysis/run_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "prism/error.h"
#include "prism/store/table.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

std::string run_name(const fs::path& h5) {
  fs::path dir = fs::absolute(h5).parent_path();
  return dir.filename().string();
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

void add_sweep_index(const fs::path& dir, RunSet& set) {
  CsvFile csv = read_csv((dir / "summary.csv").string());
  auto col = [&](const std::string& name) -> std::ptrdiff_t {
    auto it = std::find(csv.header.begin(), csv.header.end(), name);
    return it == csv.header.end() ? -1 : it - csv.header.begin();
  };
  const auto run_dir = col("run_dir"), name = col("name"), seed = col("seed"), status = col("status");
  if (run_dir < 0)
    throw Error("summary.csv has no run_dir column", (dir / "summary.csv").string(),
                "rebuild the index with prism sweep SWEEP_DIR --collect, or remove summary.csv to scan the folders");
  for (const auto& h : csv.header) add_unique(set.index_columns, h);
  if (seed >= 0 && status > seed)
    for (auto i = seed + 1; i < status; ++i) add_unique(set.param_columns, csv.header[static_cast<size_t>(i)]);
  for (const auto& row : csv.rows) {
    RunEntry e;
    for (size_t i = 0; i < csv.header.size(); ++i) e.index[csv.header[i]] = row[i];
    fs::path h5 = dir / row[static_cast<size_t>(run_dir)] / "run.h5";
    e.h5 = fs::exists(h5) ? h5.string() : "";
    e.name = name >= 0 ? row[static_cast<size_t>(name)] : row[static_cast<size_t>(run_dir)];
    set.runs.push_back(std::move(e));
  }
}

void add_scanned(const fs::path& dir, RunSet& set) {
  std::vector<fs::path> found;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied);
       it != fs::recursive_directory_iterator(); ++it) {
    if (it.depth() > 3) it.disable_recursion_pending();
    if (it->is_regular_file() && it->path().filename() == "run.h5") found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  if (found.empty())
    throw Error("no run.h5 below this directory", dir.string(),
                "pass a run.h5, a run directory or a sweep directory made by prism train / prism sweep");
  for (const auto& h5 : found)
    set.runs.push_back({fs::relative(h5.parent_path(), dir).string(), h5.string(), {}});
}

}  // namespace

RunSet find_runs(const std::vector<std::string>& paths) {
  if (paths.empty()) throw Error("no runs given", "prism export", "pass run.h5 files, run directories or sweep directories");
  RunSet set;
  for (const auto& p : paths) {
    fs::path path(p);
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      set.runs.push_back({run_name(path), path.string(), {}});
    } else if (fs::is_directory(path, ec) && fs::exists(path / "run.h5")) {
      set.runs.push_back({run_name(path / "run.h5"), (path / "run.h5").string(), {}});
    } else if (fs::is_directory(path, ec) && fs::exists(path / "summary.csv")) {
      add_sweep_index(path, set);
      set.sweep = true;
    } else if (fs::is_directory(path, ec)) {
      add_scanned(path, set);
      set.sweep = true;
    } else {
      throw Error("no such file or directory", p, "pass a run.h5, a run directory or a sweep directory");
    }
  }
  return set;
}

}  // namespace prism
