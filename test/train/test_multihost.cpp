// Data parallelism across two "hosts" (issue 17): two network namespaces joined
// by a veth pair, one rank in each, Gloo over the veth addresses
// (GLOO_SOCKET_IFNAME), the rendezvous at rank 0's address. The hosts share
// this machine's file system, as cluster nodes share one over the network;
// only rank 0 writes the run. Checked here:
//   - the 2-host run equals one process with the same global batch;
//   - a rank killed mid-run makes the other stop within PRISM_DIST_TIMEOUT with
//     an error saying it lost a peer; run.h5 and the last checkpoint stay
//     whole, and `--resume` on one process continues the curve exactly;
//   - when rank 0 cannot save a checkpoint (its disk is full), rank 1 says why,
//     not only that it lost a peer.
// The test sets up and tears down its own namespaces, so it needs root (with
// CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; elsewhere it reports itself skipped.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "prism/train/distributed.h"
#include "support.h"
#include "train/run_compare.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

// Two network namespaces, "host a" (rank 0) and "host b", joined by a veth pair.
class TwoHosts {
 public:
  TwoHosts() {
    if (::geteuid() != 0) {
      why_not_ = "creating network namespaces needs root";
      return;
    }
    if (run("ip -V").exit_code != 0) {
      why_not_ = "no `ip` command (apt-get install iproute2)";
      return;
    }
    const int id = static_cast<int>(::getpid() % 200) + 20;
    ns_ = {fmt::format("prism-a-{}", ::getpid()), fmt::format("prism-b-{}", ::getpid())};
    if_ = {fmt::format("pva{}", ::getpid()), fmt::format("pvb{}", ::getpid())};
    addr_ = {fmt::format("10.231.{}.1", id), fmt::format("10.231.{}.2", id)};
    const std::vector<std::string> setup = {
        fmt::format("ip netns add {}", ns_[0]),
        fmt::format("ip netns add {}", ns_[1]),
        fmt::format("ip link add {} type veth peer name {}", if_[0], if_[1]),
        fmt::format("ip link set {} netns {}", if_[0], ns_[0]),
        fmt::format("ip link set {} netns {}", if_[1], ns_[1]),
        fmt::format("ip -n {} addr add {}/24 dev {}", ns_[0], addr_[0], if_[0]),
        fmt::format("ip -n {} addr add {}/24 dev {}", ns_[1], addr_[1], if_[1]),
        fmt::format("ip -n {} link set {} up", ns_[0], if_[0]),
        fmt::format("ip -n {} link set {} up", ns_[1], if_[1]),
        fmt::format("ip -n {} link set lo up", ns_[0]),
        fmt::format("ip -n {} link set lo up", ns_[1]),
    };
    for (const auto& cmd : setup) {
      auto r = run(cmd);
      if (r.exit_code != 0) {
        why_not_ = fmt::format("`{}` failed: {}", cmd, r.output);
        return;
      }
    }
    ready_ = true;
  }
  ~TwoHosts() {
    for (const auto& ns : ns_)
      if (!ns.empty()) run(fmt::format("ip netns del {}", ns));  // takes its end of the veth pair along
  }
  bool ready() const { return ready_; }
  const std::string& why_not() const { return why_not_; }
  const std::string& ns(int host) const { return ns_[host]; }
  const std::string& interface(int host) const { return if_[host]; }
  const std::string& address(int host) const { return addr_[host]; }

 private:
  bool ready_ = false;
  std::string why_not_;
  std::array<std::string, 2> ns_, if_, addr_;
};

struct Rank {
  pid_t pid = -1;
  std::string log;
  int exit_code = -1;
  std::string output() const { return read_file_or_empty(log); }
};

struct RankOptions {
  std::string full_disk_at;  // rank 0 only: a private 4 MiB tmpfs mounted here (its disk fills up)
};

// Starts `prism args` as rank `rank` of 2 inside host `rank`'s namespace, with the
// variables torchrun would give a worker on a 1-process node.
Rank launch(const TwoHosts& hosts, int rank, const std::vector<std::string>& args, const std::string& log,
            const std::map<std::string, std::string>& extra_env = {}, const RankOptions& opt = {}) {
  Rank r;
  r.log = log;
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const int ns = ::open(fmt::format("/var/run/netns/{}", hosts.ns(rank)).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
      std::perror("setns");
      ::_exit(120);
    }
    if (!opt.full_disk_at.empty()) {
      // A mount namespace of its own: the small disk exists for this rank alone and
      // vanishes with it, so nothing is left mounted whatever happens to the test.
      if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          ::mount("tmpfs", opt.full_disk_at.c_str(), "tmpfs", 0, "size=4m") != 0) {
        std::perror("small disk");
        ::_exit(121);
      }
    }
    std::map<std::string, std::string> env = {
        {"RANK", std::to_string(rank)},   {"WORLD_SIZE", "2"},         {"LOCAL_RANK", "0"},
        {"LOCAL_WORLD_SIZE", "1"},        {"GROUP_RANK", std::to_string(rank)},
        {"MASTER_ADDR", hosts.address(0)}, {"MASTER_PORT", "29500"},   {"GLOO_SOCKET_IFNAME", hosts.interface(rank)},
        {"TORCHELASTIC_USE_AGENT_STORE", "False"}, {"OMP_NUM_THREADS", "1"}};
    for (const auto& [k, v] : extra_env) env[k] = v;
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<const char*> argv{PRISM_BINARY};
    for (const auto& a : args) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    ::execv(PRISM_BINARY, const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  r.pid = pid;
  return r;
}

// Waits up to `seconds` for a rank; false if it is still running.
bool wait_rank(Rank& r, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (true) {
    int status = 0;
    if (::waitpid(r.pid, &status, WNOHANG) == r.pid) {
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return true;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void stop(Rank& r) {
  if (r.exit_code >= 0) return;
  ::kill(r.pid, SIGKILL);
  wait_rank(r, 30);
}

// A tiny run whose global batch (tokens_per_step = 2 x 4 x 32) is one micro-batch
// on each of 2 ranks, or 2 accumulated micro-batches on 1 process.
std::string config_text(const std::string& data_dir, int steps) {
  return fmt::format(
      "model: {{preset: test-tiny, vocab_size: 50257}}\n"
      "schedule: {{heads: [1, 4]}}\n"
      "train: {{batch_size: 4, seq_len: 32, tokens_per_step: 256, max_steps: {}, lr: 3.0e-3, warmup_steps: 2,\n"
      "        eval_every: 3, eval_tokens: 640, distance_every: 3, distance_batch: 3, checkpoint_every: 3,\n"
      "        log_every: 1, threads: 1, dtype: fp32}}\n"
      "data: {{dir: {}}}\n",
      steps, data_dir);
}

struct Fixture {
  TempDir dir{"prism-2hosts"};
  std::string shards = dir.file("shards");
  Fixture() {
    auto r = run_reference("make_shards.py", shards);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  std::string config(int steps) {
    const std::string path = dir.file(fmt::format("run-{}.yaml", steps));
    write_file(path, config_text(shards, steps));
    return path;
  }
};





// Skips (visibly) where two hosts cannot be made or c10d Gloo is missing.
bool skip(const TwoHosts& hosts) {
  if (!prism::distributed_available()) {
    WARN("SKIPPED: no c10d Gloo in this build (apt-get install libgloo-dev and reconfigure)");
    return true;
  }
  if (!hosts.ready()) {
    WARN("SKIPPED: cannot make two hosts from network namespaces here: " << hosts.why_not());
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("2 hosts over a veth pair equal 1 process with the same global batch", "[ddp][netns]") {
  TwoHosts hosts;
  if (skip(hosts)) return;
  Fixture f;
  const std::string cfg = f.config(6);
  auto one = run_prism(fmt::format("train {} --out {}", cfg, f.dir.file("one")));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const std::vector<std::string> args = {"train", cfg, "--out", f.dir.file("two")};
  Rank r0 = launch(hosts, 0, args, f.dir.file("rank0.log")), r1 = launch(hosts, 1, args, f.dir.file("rank1.log"));
  const bool done = wait_rank(r0, 300) && wait_rank(r1, 60);
  stop(r0), stop(r1);
  INFO("rank 0:\n" << r0.output() << "\nrank 1:\n" << r1.output());
  REQUIRE(done);
  REQUIRE(r0.exit_code == 0);
  REQUIRE(r1.exit_code == 0);
  // Gloo really ran over the veth pair: the rendezvous at rank 0's veth address.
  CHECK_THAT(r0.output(), Catch::Contains("data parallel: 2 processes (torchrun), gloo via " + hosts.address(0)));
  CHECK_THAT(r0.output(), Catch::Contains("step      6 | weights identical on 2 ranks"));
  auto a = read_run(f.dir.file("one/run.h5")), b = read_run(f.dir.file("two/run.h5"));
  CHECK(b["attrs"]["world_size"] == 2);
  check_same_run(a, b);
}

TEST_CASE("a rank killed mid-run on one host: the other stops in time naming the lost peer, and --resume on 1 process continues exactly",
          "[ddp][netns]") {
  TwoHosts hosts;
  if (skip(hosts)) return;
  Fixture f;
  const int steps = 30;
  const std::string cfg = f.config(steps);
  auto ref = run_prism(fmt::format("train {} --out {}", cfg, f.dir.file("reference")));
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  const auto reference = read_run(f.dir.file("reference/run.h5"));
  const double timeout_s = 10;
  for (int victim : {1, 0}) {
    INFO("killed: rank " << victim);
    const std::string out = f.dir.file(fmt::format("run-{}", victim));
    const std::vector<std::string> args = {"train", cfg, "--out", out};
    const std::map<std::string, std::string> env = {{"PRISM_DIST_TIMEOUT", fmt::format("{}", timeout_s)}};
    std::array<Rank, 2> ranks = {launch(hosts, 0, args, out + "-rank0.log", env),
                                 launch(hosts, 1, args, out + "-rank1.log", env)};
    // Mid-run: after the step-6 checkpoint, while the steps go on.
    // A deadline, not a count of polls: a loaded machine may take minutes to get there.
    bool saw = false;
    const auto started = std::chrono::steady_clock::now();
    while (!saw && std::chrono::steady_clock::now() - started < std::chrono::seconds(300)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      saw = read_file_or_empty(out + "/checkpoints/latest").find("step_000006") != std::string::npos;
    }
    if (!saw) {
      stop(ranks[0]), stop(ranks[1]);
      FAIL("no step-6 checkpoint; rank 0:\n" << ranks[0].output() << "\nrank 1:\n" << ranks[1].output());
    }
    ::kill(ranks[victim].pid, SIGKILL);
    Rank& other = ranks[1 - victim];
    const auto t0 = std::chrono::steady_clock::now();
    const bool ended = wait_rank(other, timeout_s + 60);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stop(ranks[0]), stop(ranks[1]);
    const std::string said = other.output();
    INFO("the surviving rank said:\n" << said);
    REQUIRE(ended);
    CHECK(took < timeout_s + 30);  // the timeout plus the step in flight
    CHECK(other.exit_code == 1);
    CHECK_THAT(said, Catch::Contains(fmt::format("rank {} lost the other ranks", 1 - victim)) &&
                         Catch::Contains("PRISM_DIST_TIMEOUT") && Catch::Contains("Fix:"));
    // run.h5 opens with its rows; the last checkpoint is whole.
    auto broken = read_run(out + "/run.h5");
    CHECK(broken["attrs"]["status"] == (victim == 0 ? "running" : "failed"));  // rank 0 writes the status
    CHECK(column(broken, "train/loss").size() >= 6);
    std::string latest = read_file(out + "/checkpoints/latest");
    latest.erase(latest.find_last_not_of('\n') + 1);
    REQUIRE(fs::exists(out + "/checkpoints/" + latest + "/model.safetensors"));
    // One process continues from there; the whole curve equals the uninterrupted run's.
    auto resumed = run_prism("train --resume " + out);
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.output, Catch::Contains("trained so far by 2 processes, now 1"));
    auto after = read_run(out + "/run.h5");
    CHECK(after["attrs"]["status"] == "completed");
    REQUIRE(column(after, "train/loss").size() == static_cast<size_t>(steps));
    check_same_run(reference, after);
  }
}

TEST_CASE("rank 0 cannot save its checkpoint on a full disk: rank 1 on the other host says why", "[ddp][netns]") {
  TwoHosts hosts;
  if (skip(hosts)) return;
  Fixture f;
  const std::string cfg = f.config(12);
  const std::string out = f.dir.file("run");
  fs::create_directories(out);
  const std::vector<std::string> args = {"train", cfg, "--out", out};
  // A long timeout: rank 1 must learn the reason at once, not by waiting it out.
  const std::map<std::string, std::string> env = {{"PRISM_DIST_TIMEOUT", "120"}};
  // Rank 0 sees a 4 MiB disk at `out`: run.h5 fits, a checkpoint (~39 MB) does not.
  Rank r0 = launch(hosts, 0, args, f.dir.file("rank0.log"), env, {out});
  Rank r1 = launch(hosts, 1, args, f.dir.file("rank1.log"), env);
  const auto t0 = std::chrono::steady_clock::now();
  const bool ended = wait_rank(r1, 100);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool root_ended = wait_rank(r0, 30);
  stop(r0), stop(r1);
  const std::string said0 = r0.output(), said1 = r1.output();
  INFO("rank 0:\n" << said0 << "\nrank 1:\n" << said1);
  REQUIRE(ended);
  CHECK(root_ended);
  CHECK(took < 100);  // well inside PRISM_DIST_TIMEOUT: told, not timed out
  CHECK(r0.exit_code == 1);
  CHECK_THAT(said0, Catch::Contains("model.safetensors") && Catch::Contains("No space left on device"));
  CHECK(r1.exit_code == 1);
  CHECK_THAT(said1, Catch::Contains("rank 0 failed") && Catch::Contains("model.safetensors") &&
                        Catch::Contains("No space left on device") && Catch::Contains("--resume"));
  CHECK_THAT(said1, !Catch::Contains("lost the other ranks"));
}
