// prism bench ddp: what data parallelism costs per step at 2 processes on this
// machine -- step time against the same per-process work in 1 process, the
// communication left exposed after the backward, the gradient all-reduce alone,
// and the bytes moved per step against the parameter bytes.
#include <fmt/format.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench.h"
#include "cli.h"
#include "prism/error.h"
#include "prism/train/distributed.h"
#include "prism/train/optimizer.h"
#include "prism/train/step.h"

namespace prism::cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Bytes sent on the loopback interface so far (all processes of this host).
int64_t loopback_tx_bytes() {
  std::ifstream in("/proc/net/dev");
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name != "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    int64_t v[9] = {};
    for (auto& x : v) fields >> x;
    return v[8];  // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes
  }
  return -1;
}

struct Setup {
  ModelConfig mc;
  int64_t B, T;
  int steps, warmup;
  std::string dtype;  // fp32, or bf16 (autocast on bf16 working copies)
};

struct Timing {
  double step_s = 0;       // mean wall time per optimizer step
  double exposed_s = 0;    // per step: waiting for the all-reduce after the backward
  double allreduce_s = 0;  // the gradient all-reduce alone, per step's worth
  int64_t grad_bytes = 0, params = 0, buckets = 0, lo_bytes = -1;
};

// Times `steps` optimizer steps on random tokens; with a group of 2, the DDP path.
Timing time_steps(const Setup& s, const std::shared_ptr<ProcessGroup>& group) {
  TrainConfig tc;
  tc.device = "cpu";
  tc.threads = 1;
  tc.dtype = s.dtype;
  Execution exec = resolve_execution(tc);
  torch::manual_seed(0);
  GPT model(s.mc, HeadSchedule::uniform(s.mc.n_layer, s.mc.n_head));
  auto opt = make_adamw(*model, tc);
  BatchSource next = random_token_batches(s.mc.vocab_size, s.B, s.T, 1 + group->rank());
  std::vector<torch::Tensor> params = model->parameters();
  std::unique_ptr<GradientSync> sync;
  if (group->distributed()) {
    group->broadcast(params);
    sync = std::make_unique<GradientSync>(group, params);
  }
  Timing t;
  for (const auto& p : params) t.params += p.numel(), t.grad_bytes += p.numel() * static_cast<int64_t>(p.element_size());
  for (int i = 0; i < s.warmup; ++i) optimizer_step(model, *opt, exec, next, 1, 1.0, sync.get());
  const double waited = sync ? sync->stats().wait_s : 0;
  const int64_t lo0 = loopback_tx_bytes();
  auto t0 = Clock::now();
  for (int i = 0; i < s.steps; ++i) optimizer_step(model, *opt, exec, next, 1, 1.0, sync.get());
  t.step_s = since(t0) / s.steps;
  const int64_t lo1 = loopback_tx_bytes();
  if (!sync) return t;
  t.exposed_s = (sync->stats().wait_s - waited) / s.steps;
  t.buckets = sync->bucket_count();
  if (lo0 >= 0 && lo1 >= 0) t.lo_bytes = lo1 - lo0;
  // The same bytes all-reduced with nothing else running.
  auto flat = torch::zeros({t.params});
  group->all_reduce_sum(flat);
  t0 = Clock::now();
  for (int i = 0; i < s.steps; ++i) group->all_reduce_sum(flat);
  t.allreduce_s = since(t0) / s.steps;
  return t;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 29500;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

// Starts 2 copies of this binary as ranks (the variables torchrun sets) and
// returns rank 0's JSON line.
nlohmann::json run_workers(const std::vector<std::string>& args) {
  const int port = free_port();
  char tmpl[] = "/tmp/prism-bench-ddp-XXXXXX";
  int out_fd = mkstemp(tmpl);
  if (out_fd < 0) throw Error("cannot create a temp file", "/tmp", "check that /tmp is writable");
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw Error("fork failed", "prism bench ddp", "free some memory or processes");
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", "2", 1);
      setenv("LOCAL_WORLD_SIZE", "2", 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      if (r == 0) dup2(out_fd, 1);
      std::vector<std::string> a{"prism", "bench", "ddp", "--worker"};
      a.insert(a.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  close(out_fd);
  std::ifstream in(tmpl);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(tmpl);
  auto brace = text.rfind('{');
  if (!ok || brace == std::string::npos)
    throw Error("the 2 worker processes failed: " + text, "prism bench ddp --worker",
                "run `prism bench ddp` again; if it persists, check loopback networking");
  return nlohmann::json::parse(text.substr(brace));
}

const char* kUsage =
    "[options]\n\n"
    "Times training steps of a small uniform model on random tokens, 1 intra-op thread per\n"
    "process: 1 process with micro-batch B (the compute baseline), then 2 processes with B\n"
    "each (DDP: Gloo over loopback, bucketed all-reduce during the backward). Prints the step\n"
    "times, the communication left exposed after the backward, the gradient all-reduce\n"
    "alone, and the bytes moved per step against the parameter bytes. In bf16 the steps run\n"
    "on bf16 working copies of the matmul weights, as `prism train` does; their gradients\n"
    "are still averaged in fp32 (the same bytes as fp32).";

// Declares the options of `prism bench ddp`.
void add_options(po::options_description& o) {
  o.add_options()
      ("model", po::value<std::string>()->default_value("cpu-128"), "model preset")
      ("batch", po::value<int64_t>()->default_value(4), "micro-batch B per process")
      ("seq", po::value<int64_t>()->default_value(128), "sequence length T")
      ("steps", po::value<int>()->default_value(8), "timed steps")
      ("warmup", po::value<int>()->default_value(2), "untimed warm-up steps")
      ("dtype", po::value<std::string>()->default_value("fp32"),
       "fp32, or bf16 (autocast on bf16 working copies; gradients averaged in fp32)")
      ("worker", po::bool_switch(), "internal: run as one rank of the 2-process measurement");
}

// The measurement the options ask for; throws for an unknown dtype, a build without DDP or too long a T.
Setup setup_from(const po::variables_map& vm) {
  const std::string dtype = vm["dtype"].as<std::string>();
  if (dtype != "fp32" && dtype != "bf16") throw Error("unknown --dtype " + dtype, "prism bench ddp", "use fp32 or bf16");
  if (!distributed_available())
    throw Error("this build has no data-parallel training", "prism bench ddp",
                "install gloo's headers (apt-get install libgloo-dev) and reconfigure, with a LibTorch that has c10d Gloo");
  Setup s{model_preset(vm["model"].as<std::string>()), vm["batch"].as<int64_t>(), vm["seq"].as<int64_t>(),
          vm["steps"].as<int>(), vm["warmup"].as<int>(), dtype};
  if (s.T > s.mc.block_size)
    throw Error(fmt::format("--seq {} exceeds the model's block size {}", s.T, s.mc.block_size), "prism bench ddp", "lower --seq");
  return s;
}

// One rank of the 2-process measurement: times the steps; rank 0 prints them as a JSON line.
int run_as_worker(const Setup& s) {
  auto group = ProcessGroup::from_environment(torch::kCPU);
  Timing t = time_steps(s, group);
  if (group->is_root())
    std::cout << nlohmann::json{{"step_s", t.step_s}, {"exposed_s", t.exposed_s}, {"allreduce_s", t.allreduce_s},
                                {"grad_bytes", t.grad_bytes}, {"params", t.params}, {"buckets", t.buckets},
                                {"lo_bytes", t.lo_bytes}}.dump()
              << std::endl;
  return 0;
}

// The options passed on to the workers: the measured ones, as given or defaulted.
std::vector<std::string> worker_args(const po::variables_map& vm) {
  std::vector<std::string> pass;
  for (const char* k : {"model", "batch", "seq", "steps", "warmup", "dtype"}) {
    pass.push_back(std::string("--") + k);
    const auto& v = vm[k].value();
    if (v.type() == typeid(std::string)) pass.push_back(vm[k].as<std::string>());
    else if (v.type() == typeid(int64_t)) pass.push_back(std::to_string(vm[k].as<int64_t>()));
    else pass.push_back(std::to_string(vm[k].as<int>()));
  }
  return pass;
}

// Prints what is measured: the dtype, the machine and the model with its batch and steps.
void print_header(const Setup& s, const std::string& model) {
  std::cout << fmt::format("prism bench ddp: data-parallel training steps, random tokens, {}, 1 intra-op thread per "
                           "process\n",
                           s.dtype == "bf16" ? "bf16 (autocast on bf16 working copies of the matmul weights, "
                                               "gradients averaged in fp32)"
                                             : "fp32");
  std::cout << "machine: " << machine_description() << "\n";
  std::cout << fmt::format("model: {} ({} layers x {}, vocab {}), B={} per process, T={}, {} timed steps after {} warm-up\n\n",
                           model, s.mc.n_layer, s.mc.d_model, s.mc.vocab_size, s.B, s.T, s.steps, s.warmup);
}

// Prints the step times of 1 and 2 processes, the communication, the throughput, the bytes moved and the limits.
void print_report(const Setup& s, const Timing& one, const nlohmann::json& two) {
  const double step2 = two["step_s"], exposed = two["exposed_s"], ar = two["allreduce_s"];
  const double grad_bytes = two["grad_bytes"].get<double>(), lo = two["lo_bytes"].get<double>();
  const double tok1 = s.B * s.T / one.step_s, tok2 = 2.0 * s.B * s.T / step2;
  std::cout << fmt::format("{:<58} {:>10} {:>10}\n", "per optimizer step", "ms", "vs 1 proc");
  std::cout << fmt::format("{:<58} {:>10.1f} {:>10}\n", "1 process, B tokens x T (compute baseline)", one.step_s * 1e3, "1.00x");
  std::cout << fmt::format("{:<58} {:>10.1f} {:>9.2f}x\n", "2 processes, B x T each (global batch 2B)", step2 * 1e3,
                           step2 / one.step_s);
  std::cout << fmt::format("{:<58} {:>10.1f} {:>9.2f}x\n", "  of which waiting for the all-reduce after the backward",
                           exposed * 1e3, exposed / one.step_s);
  std::cout << fmt::format("{:<58} {:>10.1f} {:>9.2f}x\n", "gradient all-reduce alone (same bytes, nothing else running)",
                           ar * 1e3, ar / one.step_s);
  std::cout << fmt::format("\nthroughput: {:.0f} tokens/s at 1 process, {:.0f} at 2 ({:.2f}x; ideal 2.00x)\n", tok1, tok2,
                           tok2 / tok1);
  std::cout << fmt::format("parameters: {} ({:.1f} MB fp32), all-reduced in {} bucket{}\n", two["params"].get<int64_t>(),
                           grad_bytes / 1e6, two["buckets"].get<int64_t>(), two["buckets"].get<int64_t>() == 1 ? "" : "s");
  std::cout << fmt::format("bytes per step and rank: payload {:.1f} MB (1.00x the parameter bytes); a ring all-reduce "
                           "sends 2(N-1)/N x payload = {:.1f} MB at N=2\n",
                           grad_bytes / 1e6, grad_bytes / 1e6);
  if (lo >= 0)
    std::cout << fmt::format("measured on the loopback interface: {:.1f} MB sent per step and rank ({:.2f}x the parameter "
                             "bytes; includes TCP/IP headers and any other loopback traffic on this host)\n",
                             lo / s.steps / 2 / 1e6, lo / s.steps / 2 / grad_bytes);
  std::cout << "\nLimits: this machine has 2 cores, so the 2 processes share the cores the 1-process baseline has\n"
               "to itself (1 thread each); the all-reduce's Gloo threads compete with the backward for them and\n"
               "loopback has no network latency or bandwidth limit. The figures show the per-step protocol cost\n"
               "and bytes, not how training scales across real GPUs or hosts.\n";
}

int run(const std::vector<std::string>& args) {
  return guarded("bench ddp", [&]() -> int {
    po::options_description o("Options");
    add_options(o);
    po::positional_options_description pos;
    po::variables_map vm;
    if (!parse("bench ddp", kUsage, o, pos, args, vm)) return 0;
    const Setup s = setup_from(vm);
    if (vm["worker"].as<bool>()) return run_as_worker(s);
    const std::vector<std::string> pass = worker_args(vm);
    print_header(s, vm["model"].as<std::string>());
    const Timing one = time_steps(s, ProcessGroup::single());
    const nlohmann::json two = run_workers(pass);
    print_report(s, one, two);
    return 0;
  });
}

const BenchRegistration reg{{"ddp", "data-parallel step time at 2 processes vs 1; all-reduce vs compute; bytes per step", run}};

}  // namespace
}  // namespace prism::cli
