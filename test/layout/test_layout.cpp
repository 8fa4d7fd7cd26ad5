// The folders are the library boundary (lib/CMakeLists.txt): prism_core is the
// folders named in PRISM_CORE_FOLDERS plus the top-level files, and none of it may
// include LibTorch, directly or through a prism header from a torch folder.
// And one folder, lib/prism/ops, is the only adapter between tensors and kernels/:
// no other file of lib/ or apps/ includes a kernels/ header. And lib/prism's folders
// include each other without a cycle: each folder sits above the folders it includes
// (docs/development.md draws the order).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

const fs::path kLib = fs::path(PRISM_SOURCE_DIR) / "lib";
const fs::path kKernels = fs::path(PRISM_SOURCE_DIR) / "kernels";
const fs::path kOps = kLib / "prism" / "ops";

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The folders of `set(PRISM_CORE_FOLDERS ...)` in lib/CMakeLists.txt.
std::set<std::string> core_folders() {
  const std::string cmake = read_text(kLib / "CMakeLists.txt");
  std::smatch m;
  REQUIRE(std::regex_search(cmake, m, std::regex(R"(set\(PRISM_CORE_FOLDERS([^)]*)\))")));
  std::set<std::string> folders;
  std::istringstream words(m[1].str());
  for (std::string w; words >> w;) folders.insert(w);
  return folders;
}

// Every file of prism_core: the core folders' files and lib/prism's top-level files.
std::vector<fs::path> core_files(const std::set<std::string>& folders) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kLib / "prism"))
    if (e.is_regular_file()) files.push_back(e.path());
  for (const auto& d : folders)
    for (const auto& e : fs::recursive_directory_iterator(kLib / "prism" / d))
      if (e.is_regular_file() && (e.path().extension() == ".h" || e.path().extension() == ".cpp")) files.push_back(e.path());
  return files;
}

// Each #include of a file: its line number and the header it names.
std::vector<std::pair<int, std::string>> includes_of(const fs::path& file) {
  static const std::regex include_line(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::vector<std::pair<int, std::string>> out;
  std::istringstream lines(read_text(file));
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    std::smatch m;
    if (std::regex_search(line, m, include_line)) out.emplace_back(number, m[1].str());
  }
  return out;
}

// What is wrong with one core file's includes ("" when nothing is).
std::string include_problems(const fs::path& file, const std::set<std::string>& folders) {
  static const std::regex torch_header(R"(^(torch|ATen|c10|caffe2)/)");
  static const std::regex prism_header(R"(^prism/(([^/]+)/)?[^/]+$)");
  std::string problems;
  for (const auto& inc : includes_of(file)) {
    const std::string& header = inc.second;
    std::smatch p;
    if (std::regex_search(header, torch_header))
      problems += fmt::format("{}:{}: includes LibTorch ({})\n", file.string(), inc.first, header);
    else if (std::regex_match(header, p, prism_header) && p[2].matched && !folders.count(p[2].str()))
      problems += fmt::format("{}:{}: includes {} from {}/, a LibTorch folder\n", file.string(), inc.first, header,
                              p[2].str());
  }
  return problems;
}

bool is_source(const fs::path& p) {
  const auto ext = p.extension();
  return ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh" || ext == ".inc";
}

// Every source file of lib/ and apps/ outside lib/prism/ops.
std::vector<fs::path> files_outside_ops() {
  std::vector<fs::path> files;
  for (const fs::path& root : {kLib, fs::path(PRISM_SOURCE_DIR) / "apps"})
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory() && it->path() == kOps) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && is_source(it->path())) files.push_back(it->path());
    }
  return files;
}

// The includes of a kernels/ header in one file ("" when none): a header that exists
// under kernels/ (the kernels' include root, as in "cpu/adamw.h"), or one spelled kernels/...
std::string kernel_includes(const fs::path& file) {
  std::string found;
  for (const auto& inc : includes_of(file)) {
    const std::string& header = inc.second;
    const bool spelled = header.rfind("kernels/", 0) == 0;
    if (spelled || fs::is_regular_file(kKernels / header))
      found += fmt::format("{}:{}: includes {}{}\n", file.string(), inc.first, spelled ? "" : "kernels/", header);
  }
  return found;
}

// The folders of lib/prism and, for each, the folders its files include (a file at lib/prism's top
// level is folder ""), with one file:line per edge for messages.
using FolderGraph = std::map<std::string, std::map<std::string, std::string>>;

FolderGraph folder_graph(const fs::path& root) {
  static const std::regex prism_header(R"(^prism/([^/]+)/)");
  FolderGraph g;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || !is_source(e.path())) continue;
    const fs::path rel = fs::relative(e.path(), root);
    const std::string from = std::distance(rel.begin(), rel.end()) > 1 ? rel.begin()->string() : "";
    g[from];
    for (const auto& inc : includes_of(e.path())) {
      std::smatch m;
      if (!std::regex_search(inc.second, m, prism_header) || m[1].str() == from) continue;
      g[from].emplace(m[1].str(), fmt::format("{}:{}", e.path().string(), inc.first));
    }
  }
  return g;
}

// Every cycle among the folders, one per strongly connected component, as "a -> b -> a" with the
// include behind each arrow ("" when there is none).
std::string folder_cycles(const FolderGraph& g) {
  // Reachability by depth-first search from each folder; a and b share a cycle when each reaches the other.
  auto reach = [&](const std::string& start) {
    std::set<std::string> seen;
    std::vector<std::string> todo{start};
    while (!todo.empty()) {
      const std::string f = todo.back();
      todo.pop_back();
      auto it = g.find(f);
      if (it == g.end()) continue;
      for (const auto& edge : it->second)
        if (seen.insert(edge.first).second) todo.push_back(edge.first);
    }
    return seen;
  };
  std::map<std::string, std::set<std::string>> reaches;
  for (const auto& kv : g) reaches[kv.first] = reach(kv.first);
  std::string out;
  std::set<std::string> reported;
  for (const auto& [a, from_a] : reaches) {
    if (reported.count(a) || !from_a.count(a)) continue;
    std::string component;
    for (const auto& [b, from_b] : reaches)
      if (from_a.count(b) && from_b.count(a)) {
        reported.insert(b);
        component += (component.empty() ? "" : ", ") + b + "/";
      }
    out += "cycle among " + component + ":";
    for (const auto& [b, edges] : g)
      if (from_a.count(b) && reaches[b].count(a))
        for (const auto& [c, where] : edges)
          if (from_a.count(c) && reaches[c].count(a)) out += fmt::format("\n  {}/ -> {}/ ({})", b, c, where);
    out += "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("only lib/prism/ops includes kernels/: model/, train/ and the commands call ops", "[layout]") {
  const std::vector<fs::path> files = files_outside_ops();
  REQUIRE(files.size() > 100);
  std::string problems;
  for (const auto& f : files) problems += kernel_includes(f);
  INFO("Fix: put the binding (tensors to kernel parameters) in lib/prism/ops and call it from there "
       "(lib/prism/ops/README.md says where a new op goes)");
  CHECK(problems == "");
  // The rule is live: the bindings in ops/ are found by the same check.
  CHECK(kernel_includes(kOps / "attention_fused.cpp").find("includes kernels/cpu/attention_cpu.h") != std::string::npos);
  CHECK(kernel_includes(kOps / "adamw.cpp").find("includes kernels/cpu/adamw.h") != std::string::npos);
}

TEST_CASE("the kernel-include check finds kernels/ headers by either spelling", "[layout]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("prism-layout-k-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path bad = dir / "bad.cpp";
  {
    std::ofstream out(bad);
    out << "#include \"prism/ops/adamw.h\"\n#include \"cpu/adamw.h\"\n#include <vector>\n"
           "#include \"kernels/common/attention_params.h\"\n#include \"cuda/no_such_header.h\"\n";
  }
  const std::string problems = kernel_includes(bad);
  fs::remove_all(dir);
  CHECK(problems.find(":2: includes kernels/cpu/adamw.h") != std::string::npos);
  CHECK(problems.find(":4: includes kernels/common/attention_params.h") != std::string::npos);
  CHECK(problems.find(":1:") == std::string::npos);
  CHECK(problems.find(":3:") == std::string::npos);
  CHECK(problems.find(":5:") == std::string::npos);
}

TEST_CASE("prism_core's folders include no LibTorch and no header of a LibTorch folder", "[layout]") {
  const std::set<std::string> folders = core_folders();
  CHECK(folders == std::set<std::string>{"config", "schedule", "data", "launch"});
  const std::vector<fs::path> files = core_files(folders);
  REQUIRE(files.size() > 20);
  std::string problems;
  for (const auto& f : files) problems += include_problems(f, folders);
  INFO("Fix: move the file to a LibTorch folder (model/ ops/ train/ ...), or the torch-free "
       "part it needs into a core folder");
  CHECK(problems == "");
}

TEST_CASE("the layout check finds a torch include and a torch-folder include", "[layout]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("prism-layout-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path bad = dir / "bad.cpp";
  {
    std::ofstream out(bad);
    out << "#include \"prism/error.h\"\n#include \"prism/data/shard.h\"\n"
           "#include <torch/torch.h>\n#include \"prism/model/gpt.h\"\n";
  }
  const std::string problems = include_problems(bad, {"config", "schedule", "data"});
  fs::remove_all(dir);
  CHECK(problems.find(":3: includes LibTorch (torch/torch.h)") != std::string::npos);
  CHECK(problems.find(":4: includes prism/model/gpt.h from model/") != std::string::npos);
  CHECK(problems.find(":1:") == std::string::npos);
  CHECK(problems.find(":2:") == std::string::npos);
}

TEST_CASE("lib/prism's folders include each other without a cycle", "[layout]") {
  const FolderGraph g = folder_graph(kLib / "prism");
  REQUIRE(g.size() > 10);
  INFO("Fix: move what the lower folder needs from the upper one down (a general tool to a folder both use), "
       "or the upper code out of the lower folder; docs/development.md, \"The folders\", gives the order");
  CHECK(folder_cycles(g) == "");
  // The reporting layer sits above what it reports on.
  for (const char* below : {"sweep", "search", "eval", "train", "store", "model", "ops", "data", "config", "schedule"}) {
    INFO(below);
    CHECK(g.at(below).count("analysis") == 0);
  }
}

TEST_CASE("the cycle check finds a cycle through three folders and names each include", "[layout]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("prism-layout-c-{}", ::getpid());
  for (const char* f : {"a", "b", "c", "d"}) fs::create_directories(dir / f);
  auto write = [&](const char* file, const char* text) { std::ofstream(dir / file) << text; };
  write("a/x.cpp", "#include \"prism/b/y.h\"\n");
  write("b/y.h", "#include <vector>\n#include \"prism/c/z.h\"\n");
  write("c/z.h", "#include \"prism/a/x.h\"\n#include \"prism/d/w.h\"\n");
  write("d/w.h", "#include \"prism/error.h\"\n");
  const std::string cycles = folder_cycles(folder_graph(dir));
  fs::remove_all(dir);
  CHECK_THAT(cycles, Catch::Contains("cycle among a/, b/, c/:"));
  CHECK_THAT(cycles, Catch::Contains("b/ -> c/ (") && Catch::Contains("y.h:2)"));
  CHECK_THAT(cycles, Catch::Contains("c/ -> a/ (") && Catch::Contains("z.h:1)"));
  CHECK_THAT(cycles, !Catch::Contains("d/"));
}

namespace {

// Lines of lib/prism's sources (comments cut) that match `pattern`, outside the files `allowed`;
// `found_allowed` counts the matches inside them.
std::string lines_matching(const std::regex& pattern, const std::set<std::string>& allowed, size_t& found_allowed) {
  const fs::path root = kLib / "prism";
  std::string problems;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || !is_source(e.path())) continue;
    const std::string rel = fs::relative(e.path(), root).string();
    std::istringstream lines(read_text(e.path()));
    int number = 0;
    for (std::string line; std::getline(lines, line);) {
      ++number;
      const std::string code = line.substr(0, line.find("//"));
      if (!std::regex_search(code, pattern)) continue;
      if (allowed.count(rel)) ++found_allowed;
      else problems += fmt::format("{}:{}: {}\n", rel, number, line);
    }
  }
  return problems;
}

// The rule "only `allowed` may match `pattern`": no match anywhere else in lib/prism, and at least
// `live` matches inside `allowed` (the rule still finds what it guards).
void check_only_in(const std::regex& pattern, const std::set<std::string>& allowed, size_t live) {
  size_t found = 0;
  const std::string problems = lines_matching(pattern, allowed, found);
  CHECK(problems == "");
  CHECK(found >= live);
}

}  // namespace

TEST_CASE("only launch/ starts processes: nothing else in lib/ runs prism, a shell or sbatch", "[layout]") {
  // launch/process.cpp forks the trials and runs Slurm's commands; TensorBoard's Python bridge is the
  // one other child (a pipe to a writer).
  static const std::regex starts(R"(\b(popen|fork|vfork|execve|execvp|execv|posix_spawnp?|system)\s*\()");
  INFO("Fix: start processes through launch/process.h (spawn_prism, run_command); call the library instead of "
       "running `prism` (analysis/throughput_bench.cpp times in-process)");
  check_only_in(starts, {"launch/process.cpp", "export/tensorboard.cpp"}, 3);  // 3: the launchers' own calls
}

TEST_CASE("only launch/signals.cpp installs signal handlers", "[layout]") {
  // One module decides what INT, TERM and USR1 do (launch/signals.h); TensorBoard's bridge ignores SIGPIPE.
  static const std::regex handles(R"(\b(sigaction|signal)\s*\(\s*\w)");
  INFO("Fix: use launch/signals.h (install_stop_handlers for a trainer, SignalScope for a launcher)");
  check_only_in(handles, {"launch/signals.cpp", "export/tensorboard.cpp"}, 2);
}

TEST_CASE("only launch/ waits for children: one process pool for sweeps and post-processing", "[layout]") {
  // launch/pool.cpp reaps, times out and stops a pool's children; launch/process.cpp waits for a child
  // that failed to exec. A second hand-written pool loop would be a second set of rules for timeouts and signals.
  static const std::regex waits(R"(\b(waitpid|wait4|waitid)\s*\()");
  INFO("Fix: run children through launch/pool.h (run_pool) instead of a waitpid loop of your own");
  check_only_in(waits, {"launch/pool.cpp", "launch/process.cpp"}, 2);
}

TEST_CASE("only launch/slurm.cpp calls sbatch or scontrol: one Slurm submitter", "[layout]") {
  // A sweep's waves and post-processing's jobs submit through launch/slurm.h (submit_array_then_collect,
  // requeue_after_warning); a command line of their own would be a second place to learn Slurm's quirks.
  static const std::regex calls(R"rx("(sbatch|scontrol|squeue|scancel|srun)\b)rx");
  INFO("Fix: submit through launch/slurm.h");
  check_only_in(calls, {"launch/slurm.cpp"}, 3);
}
