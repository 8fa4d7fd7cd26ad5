// RunStore against h5py (test/reference/run_store_reader.py): the DESIGN.md
// schema, reading while the run writes, surviving SIGKILL, resume, and errors.
#include <H5public.h>
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "prism/error.h"
#include "prism/store/run_store.h"
#include "support.h"
#include "error_checks.h"

using prism::test::require_error;

using namespace prism;
using nlohmann::json;

namespace {

// Rows as functions of their index, mirrored in run_store_reader.py; every value
// is exact in binary floating point, so both sides compare with ==.
TrainRow train_row(int64_t i) {
  int64_t step = 3 * i;
  return {step, 4096 * (step + 1), 11.0 / double(step + 1), 1e-4 * double(step % 7 + 1), double(step) * 0.25,
          double(step) * 0.125};
}
ValRow val_row(int64_t j) {
  int64_t step = 30 * j;
  return {step, 4096 * (step + 1), 12.0 / double(step + 1), 0.5 / double(step + 1)};
}
std::vector<std::vector<double>> head_distances(int64_t step, const std::vector<int>& heads) {
  std::vector<std::vector<double>> d(heads.size());
  for (size_t l = 0; l < heads.size(); ++l)
    for (int h = 0; h < heads[l]; ++h) d[l].push_back(double((step + 1) * int64_t(l + 1)) + h * 0.5);
  return d;
}

// Twelve layers, so layer_10 and layer_11 test the two-digit names.
const std::vector<int> kHeads = {1, 2, 2, 3, 4, 4, 6, 6, 8, 8, 12, 12};

RunAttributes attributes() {
  RunAttributes a;
  a.config =
      "model:\n  n_layer: 12\n  heads: [1, 2, 2, 3, 4, 4, 6, 6, 8, 8, 12, 12]\ntrain:\n  lr: 6.0e-4  # ünïcode\n";
  a.heads = kHeads;
  a.seed = 18446744073709551557ull;  // above 2^63: the attribute must be unsigned 64-bit
  a.prism_version = "0.1.0-test";
  return a;
}

// Row i of /train, with /val every 10 rows and /attention every 20, as a trainer would.
void append_step(RunStore& store, int64_t i) {
  store.append_train(train_row(i));
  if (i % 10 == 0) store.append_val(val_row(i / 10));
  if (i % 20 == 0) store.append_attention(train_row(i).step, head_distances(train_row(i).step, kHeads));
}

json last_json_line(const std::string& output) {
  auto end = output.find_last_not_of("\n ");
  auto begin = output.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return json::parse(output.substr(begin, end - begin + 1));
}

json dump(const std::string& path) {
  auto run = test::run_reference("run_store_reader.py", fmt::format("dump '{}'", path));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return last_json_line(run.output);
}

// Rows [0, len(step)) of the dumped file match the formulas; other columns may
// hold at most one more row (a partial append cut by a kill). Returns len(step).
int64_t check_series(const json& d) {
  const json& ds = d["datasets"];
  int64_t n = ds["train/step"]["shape"][0];
  for (const char* c : {"tokens", "loss", "lr", "grad_norm", "time_s"}) {
    INFO("train/" << c);
    int64_t len = ds[std::string("train/") + c]["shape"][0];
    CHECK(len >= n);
    CHECK(len <= n + 1);
  }
  for (int64_t i = 0; i < n; ++i) {
    TrainRow r = train_row(i);
    INFO("train row " << i);
    REQUIRE(ds["train/step"]["data"][i] == r.step);
    REQUIRE(ds["train/tokens"]["data"][i] == r.tokens);
    REQUIRE(ds["train/loss"]["data"][i] == r.loss);
    REQUIRE(ds["train/lr"]["data"][i] == r.lr);
    REQUIRE(ds["train/grad_norm"]["data"][i] == r.grad_norm);
    REQUIRE(ds["train/time_s"]["data"][i] == r.time_s);
  }
  int64_t n_val = ds["val/step"]["shape"][0];
  // /val and /attention get their row after /train's, so a kill may cut the last one.
  CHECK(n_val <= (n + 9) / 10);
  CHECK(n_val >= (n + 9) / 10 - 1);
  for (int64_t j = 0; j < n_val; ++j) {
    ValRow r = val_row(j);
    REQUIRE(ds["val/step"]["data"][j] == r.step);
    REQUIRE(ds["val/tokens"]["data"][j] == r.tokens);
    REQUIRE(ds["val/loss"]["data"][j] == r.loss);
    REQUIRE(ds["val/loss_se"]["data"][j] == r.loss_se);
  }
  int64_t n_att = ds["attention/step"]["shape"][0];
  CHECK(n_att <= (n + 19) / 20);
  CHECK(n_att >= (n + 19) / 20 - 1);
  for (int64_t k = 0; k < n_att; ++k) {
    int64_t step = 60 * k;
    REQUIRE(ds["attention/step"]["data"][k] == step);
    auto expected = head_distances(step, kHeads);
    for (size_t l = 0; l < kHeads.size(); ++l) {
      INFO("attention row " << k << " layer " << l);
      REQUIRE(ds[fmt::format("attention/layer_{:02d}/distance", l)]["data"][k] == json(expected[l]));
      double mean = 0;
      for (double v : expected[l]) mean += v;
      mean /= double(expected[l].size());
      REQUIRE(ds["attention/distance"]["data"][k][l].get<double>() == Approx(mean).epsilon(1e-15));
    }
  }
  return n;
}


// A writer process that appends as fast as it can, reporting each row count
// through `fd` after the append returned (so that many rows are flushed).
[[noreturn]] void crash_child(const std::string& path, int fd) {
  try {
    RunStore store = RunStore::create(path, attributes());
    for (int64_t i = 0;; ++i) {
      append_step(store, i);
      int64_t rows = i + 1;
      if (write(fd, &rows, sizeof rows) != sizeof rows) _exit(4);
    }
  } catch (...) {
    _exit(3);
  }
}

// Starts a writer, waits until it reported `rows` flushed rows, SIGKILLs it
// mid-append and returns the last count it reported.
int64_t write_and_kill(const std::string& path, int64_t rows) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    crash_child(path, fds[1]);
  }
  close(fds[1]);
  int64_t reported = 0;
  while (reported < rows) {
    int64_t r;
    if (read(fds[0], &r, sizeof r) != sizeof r) break;
    reported = r;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  REQUIRE(reported >= rows);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  return reported;
}

}  // namespace

TEST_CASE("RunStore writes the DESIGN.md schema, and h5py reads every row and attribute", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  const int64_t rows = 1100;  // more than one chunk of 512 rows
  {
    RunStore store = RunStore::create(path, attributes());
    CHECK(store.status() == "running");
    CHECK(store.path() == path);
    for (int64_t i = 0; i < 600; ++i) append_step(store, i);
    store.write_eval("arc_easy", 0.5, 0.4375, 2376);  // mid-run: the store leaves SWMR and returns
    for (int64_t i = 600; i < rows; ++i) append_step(store, i);
    store.write_eval("hellaswag", 0.3125, 0.328125, 10042);
    store.write_eval("hellaswag", 0.25, 0.375, 10042);  // a second write replaces the first
    store.set_status("completed");
    CHECK(store.status() == "completed");
  }  // the destructor closes

  json d = dump(path);
  CHECK(d["plain_open_error"].is_null());  // a closed run opens without SWMR too
  const json& a = d["attrs"];
  CHECK(a["config"] == attributes().config);
  CHECK(a["heads"] == json(kHeads));
  CHECK(a["seed"] == attributes().seed);
  CHECK(a["status"] == "completed");
  CHECK(a["prism_version"] == "0.1.0-test");
  CHECK(d["attr_types"]["heads"] == "ndarray:int32");
  CHECK(d["attr_types"]["seed"] == "uint64:uint64");
  // Strings are fixed-length UTF-8 (h5py: numpy bytes), never variable-length (global heap).
  CHECK(d["attr_types"]["status"] == "bytes_:|S9");
  CHECK(d["attr_string_types"] == json({{"config", fmt::format("fixed utf-8 nullpad {}", attributes().config.size())},
                                        {"status", "fixed utf-8 nullpad 9"},
                                        {"prism_version", "fixed utf-8 nullpad 10"}}));
  CHECK(d["attr_types"]["unigram_val_loss"] == "float64:float64");
  CHECK(a["unigram_val_loss"].is_null());  // unknown here: NaN

  CHECK(check_series(d) == rows);
  const json& ds = d["datasets"];
  CHECK(ds["val/step"]["shape"][0] == 110);
  CHECK(ds["attention/step"]["shape"][0] == 55);
  for (const char* name : {"train/step", "train/tokens", "train/loss", "train/lr", "train/grad_norm", "train/time_s",
                           "val/step", "val/tokens", "val/loss", "val/loss_se", "attention/step"}) {
    INFO(name);
    CHECK(ds[name]["maxshape"] == json::array({nullptr}));  // extendible
    CHECK(ds[name]["chunks"].is_array());
  }
  CHECK(ds["train/step"]["dtype"] == "int64");
  CHECK(ds["train/loss"]["dtype"] == "float64");
  CHECK(ds["attention/distance"]["shape"] == json::array({55, 12}));
  CHECK(ds["attention/distance"]["maxshape"] == json::array({nullptr, 12}));
  for (size_t l = 0; l < kHeads.size(); ++l) {
    const json& layer = ds[fmt::format("attention/layer_{:02d}/distance", l)];
    CHECK(layer["shape"] == json::array({55, kHeads[l]}));
    CHECK(layer["maxshape"] == json::array({nullptr, kHeads[l]}));
  }
  CHECK(ds["eval/hellaswag/acc"]["data"] == 0.25);
  CHECK(ds["eval/hellaswag/acc_norm"]["data"] == 0.375);
  CHECK(ds["eval/hellaswag/n"]["data"] == 10042);
  CHECK(ds["eval/arc_easy/acc"]["data"] == 0.5);
  CHECK(ds["eval/arc_easy/n"]["data"] == 2376);
  CHECK(ds["eval/arc_easy/n"]["dtype"] == "int64");
  // Exactly the schema: 6 + 4 + 2 + 12 series datasets and 2 x 3 eval scalars.
  CHECK(ds.size() == 6 + 4 + 2 + 12 + 6);
}

TEST_CASE("RunStore is read by h5py while the run is still writing", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  const std::string signal = dir.file("reader-saw-live-rows");
  const int64_t rows = 300, first = 40;
  test::Process reader{-1, ""};
  std::thread follower([&] {
    reader = test::run_reference("run_store_reader.py", fmt::format("follow '{}' '{}' {}", path, signal, rows));
  });
  {
    RunStore store = RunStore::create(path, attributes());
    for (int64_t i = 0; i < first; ++i) append_step(store, i);
    // The writer holds the file open in SWMR mode until the reader has read
    // live rows, so the test cannot pass by reading only a finished file.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(signal) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(std::filesystem::exists(signal));
    for (int64_t i = first; i < rows; ++i) {
      append_step(store, i);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    store.write_eval("hellaswag", 0.3125, 0.328125, 10042);
    store.set_status("completed");
  }
  follower.join();
  INFO(reader.output);
  REQUIRE(reader.exit_code == 0);
  json s = last_json_line(reader.output);
  CHECK(s["signalled"] == true);
  CHECK(s["train_rows"] == rows);
  CHECK(s["val_rows"] == rows / 10);
  CHECK(s["attention_rows"] == rows / 20);
  CHECK(s["eval"]["hellaswag"]["acc"] == 0.3125);
  CHECK(s["plain_open_error"].is_null());
  // The reader saw the run at several lengths while its status was running.
  std::vector<int64_t> live = s["live_counts"];
  INFO("polls " << s["polls"] << ", live row counts seen: " << s["live_counts"].dump());
  CHECK(std::count_if(live.begin(), live.end(), [&](int64_t n) { return n > 0 && n < rows; }) >= 2);
}

TEST_CASE("RunStore keeps every flushed row when the writer is killed mid-append", "[store]") {
  test::TempDir dir("prism-store");
  for (int64_t kill_after : {1, 137, 700}) {
    const std::string path = dir.file(fmt::format("run-{}.h5", kill_after));
    int64_t reported = write_and_kill(path, kill_after);
    json d = dump(path);  // the SWMR open works on a killed run's file
    INFO("killed after " << reported << " reported rows; plain open: " << d["plain_open_error"].dump());
    CHECK(d["attrs"]["status"] == "running");
    int64_t n = check_series(d);
    CHECK(n >= reported);
  }
}

TEST_CASE("RunStore::resume continues a killed run from its checkpoint step", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  int64_t reported = write_and_kill(path, 400);
  // The last checkpoint was at row 250 (step 750): rows after it are dropped.
  const int64_t keep_rows = 251;
  {
    RunStore store = RunStore::resume(path, train_row(keep_rows - 1).step);
    CHECK(store.status() == "running");
    CHECK(store.attributes().heads == kHeads);
    CHECK(store.attributes().config == attributes().config);
    CHECK(store.attributes().seed == attributes().seed);
    // Steps at or before the kept checkpoint are refused: the run continues after it.
    require_error([&] { store.append_train(train_row(keep_rows - 1)); }, {path, "step 750 does not follow step 750"});
    for (int64_t i = keep_rows; i < reported + 100; ++i) append_step(store, i);
    store.set_status("completed");
  }
  json d = dump(path);
  CHECK(d["plain_open_error"].is_null());
  CHECK(d["attrs"]["status"] == "completed");
  // One unbroken series: the rows kept from before the kill, then the new ones.
  CHECK(check_series(d) == reported + 100);
  CHECK(d["datasets"]["val/step"]["shape"][0] == (reported + 100 + 9) / 10);
}

TEST_CASE("RunStore::resume drops rows after the kept step in every group", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  {
    RunStore store = RunStore::create(path, attributes());
    for (int64_t i = 0; i < 95; ++i) append_step(store, i);
    store.set_status("failed");
  }
  {
    // Keep through step 135 (row 45): train rows 0..45, val steps 0..120, attention steps 0..120.
    RunStore store = RunStore::resume(path, 135);
    CHECK(store.status() == "running");
    store.close();
  }
  json d = dump(path);
  CHECK(d["attrs"]["status"] == "running");
  CHECK(check_series(d) == 46);
  CHECK(d["datasets"]["val/step"]["shape"][0] == 5);
  CHECK(d["datasets"]["attention/step"]["shape"][0] == 3);
  for (size_t l = 0; l < kHeads.size(); ++l)
    CHECK(d["datasets"][fmt::format("attention/layer_{:02d}/distance", l)]["shape"][0] == 3);
  // Appending after the shrink writes fresh rows, never stale ones from before.
  {
    RunStore store = RunStore::resume(path, 135);
    for (int64_t i = 46; i < 60; ++i) append_step(store, i);
  }
  CHECK(check_series(dump(path)) == 60);
}

TEST_CASE("RunStore::create refuses an existing file and names it", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  {
    RunStore store = RunStore::create(path, attributes());
    store.append_train(train_row(0));
    store.set_status("completed");
  }
  std::string before = test::read_file(path);
  require_error([&] { RunStore::create(path, attributes()); }, {path, "already exists", "--resume", "--force"});
  CHECK(test::read_file(path) == before);  // untouched
}

TEST_CASE("RunStore::create names the path of a missing or unwritable directory", "[store]") {
  test::TempDir dir("prism-store");
  const std::string missing = dir.file("no-such-dir/run.h5");
  require_error([&] { RunStore::create(missing, attributes()); }, {missing, "does not exist"});
  test::write_file(dir.file("a-file"), "x");
  const std::string under_file = dir.file("a-file/run.h5");
  require_error([&] { RunStore::create(under_file, attributes()); }, {under_file, "cannot create"});
  // Root may write anywhere but sysfs; others get a read-only directory.
  std::string read_only = "/sys/prism-run.h5";
  if (geteuid() != 0) {
    std::filesystem::create_directory(dir.file("ro"));
    chmod(dir.file("ro").c_str(), 0555);
    read_only = dir.file("ro/run.h5");
  }
  require_error([&] { RunStore::create(read_only, attributes()); }, {read_only, "cannot create", "writ"});
  CHECK_FALSE(std::filesystem::exists(read_only));
}

TEST_CASE("RunStore allows one writer per file", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  RunStore store = RunStore::create(path, attributes());
  store.append_train(train_row(0));
  require_error([&] { RunStore::resume(path, 0); }, {path, "being written by another process"});
  require_error([&] { RunStore::open(path); }, {path, "being written by another process"});
  store.append_train(train_row(1));  // the first writer is unaffected
  store.close();
  RunStore again = RunStore::open(path);
  CHECK(again.status() == "running");
  again.write_eval("piqa", 0.625, 0.6875, 1838);
  again.close();
  json d = dump(path);
  CHECK(d["datasets"]["train/step"]["shape"][0] == 2);
  CHECK(d["datasets"]["eval/piqa/acc_norm"]["data"] == 0.6875);
}

TEST_CASE("RunStore rejects malformed rows, names and files", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  {
    RunStore store = RunStore::create(path, attributes());
    auto distances = head_distances(0, kHeads);
    distances.pop_back();
    require_error([&] { store.append_attention(0, distances); }, {path, "11 layers, the run has 12"});
    distances = head_distances(0, kHeads);
    distances[10].push_back(1.0);
    require_error([&] { store.append_attention(0, distances); }, {"layer 10: 13 head distances", "12 heads"});
    store.append_train(train_row(2));
    require_error([&] { store.append_train(train_row(1)); }, {"step 3 does not follow step 6", "/train"});
    require_error([&] { store.set_status("done"); }, {"unknown run status 'done'"});
    require_error([&] { store.write_eval("a/b", 0, 0, 0); }, {"invalid eval task name 'a/b'"});
    store.close();
    require_error([&] { store.append_train(train_row(3)); }, {path, "closed"});
  }
  {
    // Only the accepted row was written; the refused ones left no trace.
    json d = dump(path);
    CHECK(d["datasets"]["train/step"]["data"] == json::array({6}));
    CHECK(d["datasets"]["train/loss"]["data"] == json::array({train_row(2).loss}));
    CHECK(d["datasets"]["attention/step"]["shape"][0] == 0);
  }
  RunAttributes no_heads = attributes();
  no_heads.heads.clear();
  require_error([&] { RunStore::create(dir.file("empty.h5"), no_heads); }, {"head schedule is empty"});
  CHECK_FALSE(std::filesystem::exists(dir.file("empty.h5")));

  const std::string not_hdf5 = dir.file("notes.h5");
  test::write_file(not_hdf5, "these are not the droids\n");
  require_error([&] { RunStore::resume(not_hdf5, 0); }, {not_hdf5, "cannot open the run store"});
  require_error([&] { RunStore::resume(dir.file("absent.h5"), 0); }, {dir.file("absent.h5"), "no run store"});
}

// Fault injection for the full-disk test. HDF5's sec2 driver writes with pwrite;
// this definition in the test binary takes precedence over libc's, fails writes
// to the one file whose inode is set here with ENOSPC, and passes every other
// write through. Only the forked child of that test ever sets the inode.
static std::atomic<ino_t> full_disk_inode{0};

extern "C" ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) {
  using Pwrite = ssize_t (*)(int, const void*, size_t, off_t);
  static const auto libc_pwrite = reinterpret_cast<Pwrite>(dlsym(RTLD_NEXT, "pwrite"));
  if (ino_t full = full_disk_inode.load(); full != 0) {
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_ino == full) {
      errno = ENOSPC;
      return -1;
    }
  }
  return libc_pwrite(fd, buf, n, offset);
}

TEST_CASE("RunStore reports a full disk naming the file, keeps the flushed rows and exits cleanly", "[store]") {
  test::TempDir dir("prism-store");
  const std::string path = dir.file("run.h5");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::string message = "no error";
    int64_t rows = 0;
    bool injected = false;
    {
      std::optional<RunStore> store;
      try {
        store.emplace(RunStore::create(path, attributes()));
        for (; rows < 300; ++rows) append_step(*store, rows);
        // The pwrite above must be the one HDF5 calls, or this test proves nothing.
        struct stat st;
        stat(path.c_str(), &st);
        full_disk_inode = st.st_ino;  // the disk is full from here on
        for (; rows < 100000; ++rows) append_step(*store, rows);
      } catch (const Error& e) {
        message = e.what();
        injected = full_disk_inode != 0;
        try {
          append_step(*store, rows);  // a stopped store refuses further rows
        } catch (const Error& again) {
          message += std::string("\n") + again.what();
        }
      }
    }  // closes
    // With the disk still full: HDF5 1.10 crashes here, at library shutdown, if
    // a failed close left a dangling id behind.
    H5close();
    message = fmt::format("{}\n{}\n{}", rows, injected ? "injected" : "not injected", message);
    ssize_t written = write(fds[1], message.data(), message.size());
    _exit(written == ssize_t(message.size()) ? 0 : 4);
  }
  close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(report);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<std::string> lines;
  for (size_t begin = 0, end; begin <= report.size(); begin = end + 1) {
    end = report.find('\n', begin);
    if (end == std::string::npos) end = report.size();
    lines.push_back(report.substr(begin, end - begin));
  }
  REQUIRE(lines.size() == 4);
  int64_t appended = std::stoll(lines[0]);
  CHECK(appended == 300);  // the first append after the disk filled failed
  CHECK(lines[1] == "injected");
  CHECK(lines[2].find(path) != std::string::npos);
  CHECK(lines[2].find("cannot append") != std::string::npos);
  CHECK(lines[2].find("No space left on device") != std::string::npos);  // HDF5's own reason
  CHECK(lines[2].find("--resume") != std::string::npos);
  CHECK(lines[3].find("stopped after a failed write") != std::string::npos);
  // Every row whose append returned is in the file.
  json d = dump(path);
  CHECK(check_series(d) >= appended);
  // And the run continues once there is space again.
  {
    RunStore store = RunStore::resume(path, train_row(appended - 1).step);
    for (int64_t i = appended; i < appended + 50; ++i) append_step(store, i);
    store.set_status("completed");
  }
  CHECK(check_series(dump(path)) == appended + 50);
}
