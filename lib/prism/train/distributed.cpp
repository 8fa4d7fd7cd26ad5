#include "prism/train/distributed.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_map>

#include "prism/error.h"

#ifdef PRISM_HAVE_DISTRIBUTED
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef PRISM_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#endif

namespace prism {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, int lo, int hi) {
  const char* v = env(name);
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (!end || *end || n < lo || n > hi)
    throw Error(fmt::format("{}={} is not a whole number in [{}, {}]", name, v, lo, hi), "environment",
                fmt::format("set {} as the launcher would (torchrun or srun set it for you)", name));
  return static_cast<int>(n);
}

// The first host of a Slurm node list: "a,b" -> a, "node[01-04,07]" -> node01.
std::string first_slurm_host(const std::string& list) {
  auto bracket = list.find('[');
  auto comma = list.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) return list.substr(0, comma);
  auto end = list.find_first_of(",-]", bracket + 1);
  return list.substr(0, bracket) + list.substr(bracket + 1, end - bracket - 1);
}

// SLURM_GPUS_PER_TASK is a count or type:count ("1", "h100:2").
int slurm_gpus_per_task() {
  const char* v = env("SLURM_GPUS_PER_TASK");
  if (!v) return 0;
  std::string s = v;
  if (auto colon = s.rfind(':'); colon != std::string::npos) s = s.substr(colon + 1);
  return std::atoi(s.c_str());
}

}  // namespace

bool distributed_available() {
#ifdef PRISM_HAVE_DISTRIBUTED
  return true;
#else
  return false;
#endif
}

DistributedEnv read_distributed_env() {
  DistributedEnv e;
  e.gpus_per_task = slurm_gpus_per_task();
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) e.visible_devices = v;
  if (env("WORLD_SIZE")) {
    e.launcher = "torchrun";
    e.world_size = env_int("WORLD_SIZE", 1, 1 << 20);
    if (e.world_size == 1 && !env("RANK")) return e;
    if (!env("RANK"))
      throw Error("WORLD_SIZE is set but RANK is not", "environment", "launch with torchrun, or set RANK for every process");
    e.rank = env_int("RANK", 0, e.world_size - 1);
    e.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, 1 << 20) : e.rank;
    e.agent_store = env("TORCHELASTIC_USE_AGENT_STORE") && std::string(env("TORCHELASTIC_USE_AGENT_STORE")) == "True";
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    e.launcher = "slurm";
    e.world_size = env_int("SLURM_NTASKS", 1, 1 << 20);
    e.rank = env_int("SLURM_PROCID", 0, e.world_size - 1);
    e.local_rank = env("SLURM_LOCALID") ? env_int("SLURM_LOCALID", 0, 1 << 20) : 0;
    if (!env("MASTER_ADDR") && env("SLURM_JOB_NODELIST")) e.master_addr = first_slurm_host(env("SLURM_JOB_NODELIST"));
  } else {
    return e;
  }
  e.local_world_size = e.world_size;
  for (const char* name : {"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    if (!env(name)) continue;
    int n = std::atoi(env(name));  // Slurm may write "2(x3)": the leading count is ours
    if (n >= 1) e.local_world_size = std::min(n, e.world_size);
    break;
  }
  if (e.world_size > 1 && e.launcher == "torchrun" && !env("MASTER_ADDR"))
    throw Error("WORLD_SIZE > 1 but MASTER_ADDR is not set", "environment",
                "launch with torchrun, or export MASTER_ADDR (the host of rank 0) and MASTER_PORT for every process");
  if (env("MASTER_ADDR")) e.master_addr = env("MASTER_ADDR");
  if (env("MASTER_PORT")) e.master_port = env_int("MASTER_PORT", 1, 65535);
  return e;
}

CudaDevicePick pick_cuda_device(const DistributedEnv& e, int visible) {
  const std::string seen =
      e.visible_devices.empty() ? fmt::format("{} visible", visible)
                                : fmt::format("{} visible (CUDA_VISIBLE_DEVICES={})", visible, e.visible_devices);
  if (visible < 1)
    throw Error("no CUDA device is visible to this process", fmt::format("rank {} of {}", e.rank, e.world_size),
                "check CUDA_VISIBLE_DEVICES and the job's GPU request (Slurm: --gpus-per-task=1), or train.device=cpu");
  if (e.world_size == 1) return {0, fmt::format("one process, device 0 of {}", seen)};
  if (visible == 1) return {0, fmt::format("LOCAL_RANK {}, the one GPU it sees ({})", e.local_rank, seen)};
  if (e.local_rank < visible) return {e.local_rank, fmt::format("LOCAL_RANK {} of {} GPUs", e.local_rank, seen)};
  if (e.launcher == "slurm" && e.gpus_per_task > 0)
    return {0, fmt::format("LOCAL_RANK {}: Slurm gave this task its own {} GPU(s), {}, using the first", e.local_rank,
                           e.gpus_per_task, seen)};
  throw Error(fmt::format("LOCAL_RANK {} but this process sees only {} CUDA devices ({})", e.local_rank, visible, seen),
              fmt::format("rank {} of {} ({})", e.rank, e.world_size, e.launcher),
              "start at most one process per visible GPU (torchrun --nproc-per-node <= the GPU count), or bind one GPU "
              "to each Slurm task (srun --gpus-per-task=1 or --gpu-bind=single:1)");
}

torch::Device bind_rank_device(const DistributedEnv& e, torch::Device requested) {
  if (!requested.is_cuda()) return requested;
  const auto pick = pick_cuda_device(e, static_cast<int>(torch::cuda::device_count()));
  const torch::Device dev(torch::kCUDA, static_cast<c10::DeviceIndex>(pick.index));
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(dev);
  return dev;
}

std::chrono::milliseconds distributed_timeout() {
  const char* v = env("PRISM_DIST_TIMEOUT");
  if (!v) return std::chrono::seconds(300);
  char* end = nullptr;
  double s = std::strtod(v, &end);
  if (!end || *end || !(s > 0) || s > 1e7)
    throw Error(fmt::format("PRISM_DIST_TIMEOUT={} is not a positive number of seconds", v), "environment",
                "set it to seconds, e.g. PRISM_DIST_TIMEOUT=600");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// ---------------------------------------------------------------- ProcessGroup

#ifdef PRISM_HAVE_DISTRIBUTED
struct ProcessGroup::Backend {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> pg;
  std::string name;
};

namespace {

class PendingWork : public ProcessGroup::Pending {
 public:
  PendingWork(const ProcessGroup& g, c10::intrusive_ptr<c10d::Work> w, std::chrono::milliseconds timeout)
      : g_(g), w_(std::move(w)), timeout_(timeout) {}
  void wait() override {
    try {
      w_->wait(timeout_);
    } catch (const std::exception& e) {
      g_.fail("an all-reduce", e.what());
    }
  }

 private:
  const ProcessGroup& g_;
  c10::intrusive_ptr<c10d::Work> w_;
  std::chrono::milliseconds timeout_;
};

}  // namespace
#else
struct ProcessGroup::Backend {};
#endif

ProcessGroup::~ProcessGroup() = default;

std::shared_ptr<ProcessGroup> ProcessGroup::single() { return std::shared_ptr<ProcessGroup>(new ProcessGroup()); }

std::shared_ptr<ProcessGroup> ProcessGroup::from_environment(torch::Device device) {
  auto g = single();
  g->env_ = read_distributed_env();
  g->device_ = device;
  if (g->env_.world_size == 1) return g;
  g->timeout_ = distributed_timeout();
#ifndef PRISM_HAVE_DISTRIBUTED
  throw Error(fmt::format("{} processes were launched ({}), but this build of Prism has no data-parallel training",
                          g->env_.world_size, g->env_.launcher),
              "environment (WORLD_SIZE / SLURM_NTASKS)",
              "run one process, or rebuild with a LibTorch that has c10d Gloo and gloo's headers (apt-get install "
              "libgloo-dev, then reconfigure)");
#else
  const auto& e = g->env_;
  const std::string where = fmt::format("rank {} of {}, rendezvous at {}:{}", e.rank, e.world_size, e.master_addr, e.master_port);
  g->backend_ = std::make_unique<Backend>();
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(e.master_port);
    so.isServer = !e.agent_store && e.rank == 0;  // under torchrun's agent, its store is the server
    so.numWorkers = e.world_size;
    so.timeout = g->timeout_;
    so.multiTenant = !e.agent_store;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(e.master_addr, so);
    g->backend_->store = c10::make_intrusive<c10d::PrefixStore>("prism/", tcp);
  } catch (const std::exception& ex) {
    throw Error(fmt::format("rendezvous failed: {}", ex.what()), where,
                "check MASTER_ADDR/MASTER_PORT (rank 0's host and a free port), that every rank was launched (srun, "
                "not a bare command in an sbatch script), and raise PRISM_DIST_TIMEOUT if ranks start slowly");
  }
  try {
    if (device.is_cuda()) {
#ifdef PRISM_HAVE_NCCL
      auto o = c10d::ProcessGroupNCCL::Options::create();
      o->timeout = g->timeout_;
      g->backend_->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(g->backend_->store, e.rank, e.world_size, o);
      g->backend_->name = "nccl";
#else
      throw Error("training on CUDA across processes needs NCCL, which this build lacks", where,
                  "use a CUDA LibTorch built with NCCL (and nccl.h on the include path), or train.device=cpu");
#endif
    } else {
      auto o = c10d::ProcessGroupGloo::Options::create(g->timeout_);
      // GLOO_SOCKET_IFNAME picks the network interfaces, as in PyTorch; else the host name's address.
      if (const char* ifs = prism::env("GLOO_SOCKET_IFNAME")) {
        std::string list = ifs;
        for (size_t a = 0; a <= list.size();) {
          size_t b = list.find(',', a);
          if (b == std::string::npos) b = list.size();
          if (b > a) o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(list.substr(a, b - a)));
          a = b + 1;
        }
      } else {
        o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      g->backend_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(g->backend_->store, e.rank, e.world_size, o);
      g->backend_->name = "gloo";
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& ex) {
    throw Error(fmt::format("could not connect the ranks: {}", ex.what()), where,
                "check that every host reaches the others (GLOO_SOCKET_IFNAME picks the interface) and that all ranks "
                "were launched; raise PRISM_DIST_TIMEOUT if they start slowly");
  }
  return g;
#endif
}

std::string ProcessGroup::describe() const {
  if (!distributed()) return "1 process";
#ifdef PRISM_HAVE_DISTRIBUTED
  return fmt::format("{} processes ({}), {} via {}:{}, timeout {}s", env_.world_size, env_.launcher, backend_->name,
                     env_.master_addr, env_.master_port, timeout_.count() / 1000.0);
#else
  return "unavailable";
#endif
}

#ifdef PRISM_HAVE_DISTRIBUTED
namespace {

std::string key_of(int rank, const char* part) { return fmt::format("failure/{}/{}", rank, part); }

// The error another rank posted before it broke off (report_failure), if any.
// The store lives in rank 0: when rank 0 died, reading fails and there is none.
std::optional<Error> posted_failure(c10d::Store& store, const DistributedEnv& e, std::chrono::milliseconds timeout) {
  try {
    store.setTimeout(std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10)));
    for (int r = 0; r < e.world_size; ++r) {
      if (r == e.rank || !store.check({key_of(r, "what")})) continue;
      auto text = [&](const char* part) {
        const auto v = store.get(key_of(r, part));
        return std::string(v.begin(), v.end());
      };
      Error posted(fmt::format("rank {} failed: {}", r, text("what")),
                   fmt::format("{} (rank {} of {} stopped with it)", text("where"), e.rank, e.world_size),
                   text("fix") + "; then continue the run with --resume");
      store.set(fmt::format("ack/{}", e.rank), std::vector<uint8_t>{1});
      return posted;
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace
#endif

void ProcessGroup::report_failure(const Error& error) {
  if (!distributed() || peer_lost_) return;
#ifdef PRISM_HAVE_DISTRIBUTED
  if (!backend_ || !backend_->store) return;
  auto bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  try {
    backend_->store->set(key_of(env_.rank, "where"), bytes(error.where()));
    backend_->store->set(key_of(env_.rank, "fix"), bytes(error.fix()));
    backend_->store->set(key_of(env_.rank, "what"), bytes(error.what_part()));  // last: its presence means complete
  } catch (const std::exception&) {
    return;  // the store is gone with rank 0: the others report a lost peer
  }
  if (!is_root()) return;  // its exit closes its connections; rank 0 reads the reason from its own store
  backend_->pg.reset();    // the others' pending collectives fail now rather than at the timeout
  for (int r = 1; r < env_.world_size; ++r) {
    try {
      backend_->store->wait({fmt::format("ack/{}", r)}, timeout_);
    } catch (const std::exception&) {
      // that rank died or hangs: it cannot read the reason anyway
    }
  }
#else
  (void)error;
#endif
}

void ProcessGroup::fail(const std::string& during, const std::string& why) const {
  peer_lost_ = true;
#ifdef PRISM_HAVE_DISTRIBUTED
  if (backend_ && backend_->store)
    if (auto posted = posted_failure(*backend_->store, env_, timeout_)) throw *posted;
#endif
  std::string first = why.substr(0, why.find('\n'));
  throw Error(fmt::format("rank {} lost the other ranks during {}: {}", env_.rank, during, first),
              fmt::format("process group of {} ({})", env_.world_size, env_.launcher),
              fmt::format("another rank died or hung for {}s (PRISM_DIST_TIMEOUT); see its log, fix it and continue "
                          "with --resume",
                          timeout_.count() / 1000.0));
}

void ProcessGroup::broadcast(const std::vector<torch::Tensor>& tensors) {
  if (!distributed()) return;
#ifdef PRISM_HAVE_DISTRIBUTED
  torch::NoGradGuard ng;
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_type;  // one message per dtype
  for (const auto& t : tensors) by_type[t.scalar_type()].push_back(t);
  for (auto& [type, ts] : by_type) {
    std::vector<torch::Tensor> flat_parts;
    for (const auto& t : ts) flat_parts.push_back(t.detach().reshape(-1));
    std::vector<at::Tensor> msg{torch::cat(flat_parts).to(device_)};
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    o.timeout = timeout_;
    try {
      if (!backend_->pg) throw std::runtime_error("this rank already stopped on its own error");
      backend_->pg->broadcast(msg, o)->wait(timeout_);
    } catch (const std::exception& e) {
      fail("a broadcast", e.what());
    }
    int64_t off = 0;
    for (auto& t : ts) {
      t.detach().copy_(msg[0].narrow(0, off, t.numel()).view_as(t));
      off += t.numel();
    }
  }
#endif
}

namespace {

// A sum over one process: already there.
struct Landed : ProcessGroup::Pending {
  void wait() override {}
};

}  // namespace

std::unique_ptr<ProcessGroup::Pending> ProcessGroup::all_reduce_sum_async(torch::Tensor t) {
  if (!distributed()) return std::make_unique<Landed>();
#ifdef PRISM_HAVE_DISTRIBUTED
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  o.timeout = timeout_;
  std::vector<at::Tensor> v{std::move(t)};
  try {
    if (!backend_->pg) throw std::runtime_error("this rank already stopped on its own error");
    return std::make_unique<PendingWork>(*this, backend_->pg->allreduce(v, o), timeout_);
  } catch (const std::exception& e) {
    fail("an all-reduce", e.what());
  }
#else
  (void)t;
  throw Error("no process group in this build", "ProcessGroup", "run one process");
#endif
}

void ProcessGroup::all_reduce_sum(torch::Tensor& t) {
  if (!distributed()) return;
  all_reduce_sum_async(t)->wait();
}

double ProcessGroup::mean(double v) {
  if (!distributed()) return v;
  auto t = torch::full({1}, v, torch::dtype(torch::kDouble).device(device_));
  all_reduce_sum(t);
  return t.item<double>() / world_size();
}

bool ProcessGroup::any(bool v) {
  if (!distributed()) return v;
  auto t = torch::full({1}, v ? 1.0 : 0.0, torch::dtype(torch::kFloat).device(device_));
  all_reduce_sum(t);
  return t.item<float>() > 0;
}

// ---------------------------------------------------------------- GradientSync

namespace {

struct Bucket {
  std::vector<size_t> params;  // indices into Buckets::params
  torch::Tensor flat;          // the bucket's gradients, contiguous
  size_t pending = 0;          // gradients still to arrive this step
  std::unique_ptr<ProcessGroup::Pending> work;
};

// Where a parameter's gradient arrives: on the parameter, on its bf16 working copy, or both.
enum Source : uint8_t { kParam = 1, kCopy = 2 };

}  // namespace

struct GradientSync::Buckets {
  std::shared_ptr<ProcessGroup> group;
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> copies;  // per parameter: its working copy, or undefined
  std::vector<uint8_t> expect, seen;  // per parameter: the sources to wait for, and those seen this step
  std::vector<bool> gathered;         // per parameter: in its bucket this step
  std::vector<size_t> bucket_of;
  std::vector<int64_t> offset_of;
  std::vector<Bucket> buckets;
  const WorkingCopies* bound = nullptr;
  bool communicate = false;
  size_t next_launch = 0;

  torch::Tensor slot(size_t i) { return buckets[bucket_of[i]].flat.narrow(0, offset_of[i], params[i].numel()); }

  void arrive(size_t i, Source from) {
    if (!communicate || gathered[i] || (seen[i] & from)) return;
    seen[i] |= from;
    if (seen[i] == expect[i]) gather(i);
  }

  // The parameter's gradient into its slot: its own (dense, or the embedding's
  // sparse rows, summed per row first as the optimizer would) plus its copy's
  // bf16 one, in fp32. A parameter without a gradient contributes zeros, so no
  // rank waits forever on its bucket.
  void gather(size_t i) {
    gathered[i] = true;
    torch::NoGradGuard ng;
    auto s = slot(i);
    const torch::Tensor own = params[i].grad(), copy = copies[i].defined() ? copies[i].grad() : torch::Tensor();
    if (own.defined() && !own.is_sparse()) {
      s.copy_(own.reshape(-1));
      if (copy.defined()) s.add_(copy.reshape(-1));
    } else {
      if (copy.defined()) s.copy_(copy.reshape(-1));
      else s.zero_();
      if (own.defined()) s.view_as(params[i]).add_(own.coalesce());
    }
    if (--buckets[bucket_of[i]].pending == 0) launch_ready();
  }

  // Buckets go out strictly in index order, so every rank issues the same sequence.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch++];
      b.flat.div_(group->world_size());
      b.work = group->all_reduce_sum_async(b.flat);
    }
  }
};

namespace {

struct ArriveHook : torch::autograd::PostAccumulateGradHook {
  std::weak_ptr<GradientSync::Buckets> b;
  size_t i;
  Source from;
  ArriveHook(std::weak_ptr<GradientSync::Buckets> b, size_t i, Source from) : b(std::move(b)), i(i), from(from) {}
  void operator()(const torch::autograd::Variable&) override {
    if (auto s = b.lock()) s->arrive(i, from);
  }
};

}  // namespace

GradientSync::GradientSync(std::shared_ptr<ProcessGroup> group, std::vector<torch::Tensor> params, int64_t bucket_bytes,
                           int64_t first_bucket_bytes)
    : b_(std::make_shared<Buckets>()) {
  auto& b = *b_;
  b.group = std::move(group);
  for (auto& p : params)
    if (p.requires_grad()) b.params.push_back(p);
  const size_t n = b.params.size();
  b.copies.resize(n);
  b.expect.assign(n, kParam);
  b.seen.assign(n, 0);
  b.gathered.assign(n, false);
  b.bucket_of.resize(n);
  b.offset_of.resize(n);
  int64_t cap = first_bucket_bytes, bytes = 0, numel = 0;
  for (size_t k = n; k-- > 0;) {  // reverse registration order: the backward's order, roughly
    const auto& p = b.params[k];
    if (b.buckets.empty() || bytes >= cap || p.scalar_type() != b.params[b.buckets.back().params.front()].scalar_type()) {
      if (!b.buckets.empty()) {
        b.buckets.back().flat = torch::zeros({numel}, b.params[b.buckets.back().params.front()].options());
        cap = bucket_bytes;
      }
      b.buckets.emplace_back();
      bytes = numel = 0;
    }
    b.bucket_of[k] = b.buckets.size() - 1;
    b.offset_of[k] = numel;
    b.buckets.back().params.push_back(k);
    numel += p.numel();
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }
  if (!b.buckets.empty())
    b.buckets.back().flat = torch::zeros({numel}, b.params[b.buckets.back().params.front()].options());
  for (size_t k = 0; k < n; ++k)
    torch::autograd::impl::set_post_acc_grad_hooks(b.params[k], std::make_unique<ArriveHook>(b_, k, kParam));
  stats_.buckets = static_cast<int64_t>(b.buckets.size());
}

GradientSync::~GradientSync() {
  for (auto& p : b_->params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  for (auto& c : b_->copies)
    if (c.defined()) torch::autograd::impl::set_post_acc_grad_hooks(c, nullptr);
}

void GradientSync::use_working_copies(const WorkingCopies& copies) {
  auto& b = *b_;
  if (b.bound == &copies) return;
  if (b.bound)
    throw Error("this gradient sync already follows another set of working copies", "GradientSync",
                "make one set of working copies per model (the optimizer keeps it)");
  std::unordered_map<const void*, size_t> index;
  for (size_t k = 0; k < b.params.size(); ++k) index[b.params[k].unsafeGetTensorImpl()] = k;
  for (const auto& e : copies.entries()) {
    auto it = index.find(e.master.unsafeGetTensorImpl());
    if (it == index.end())
      throw Error("a working copy's master weight is not among the parameters this gradient sync averages",
                  "GradientSync", "build the GradientSync from the model whose weights have the copies");
    const size_t k = it->second;
    b.copies[k] = e.copy;
    b.expect[k] = e.master_read ? kParam | kCopy : kCopy;
    torch::autograd::impl::set_post_acc_grad_hooks(e.copy, std::make_unique<ArriveHook>(b_, k, kCopy));
  }
  b.bound = &copies;
}

int64_t GradientSync::bucket_count() const { return static_cast<int64_t>(b_->buckets.size()); }

ProcessGroup& GradientSync::group() const { return *b_->group; }

void GradientSync::prepare(bool communicate) {
  auto& b = *b_;
  b.communicate = communicate;
  if (!communicate) return;
  b.next_launch = 0;
  std::fill(b.seen.begin(), b.seen.end(), 0);
  std::fill(b.gathered.begin(), b.gathered.end(), false);
  for (auto& bucket : b.buckets) {
    bucket.pending = bucket.params.size();
    bucket.work.reset();
  }
}

void GradientSync::finish() {
  auto& b = *b_;
  if (!b.communicate) return;
  const auto t0 = std::chrono::steady_clock::now();
  // A parameter the backward did not reach (or reached by one of its two sources only) goes in as it is.
  for (size_t i = 0; i < b.params.size(); ++i)
    if (!b.gathered[i]) b.gather(i);
  b.launch_ready();
  torch::NoGradGuard ng;
  for (auto& bucket : b.buckets) {
    bucket.work->wait();
    bucket.work.reset();
    stats_.bytes += bucket.flat.numel() * static_cast<int64_t>(bucket.flat.element_size());
  }
  for (size_t i = 0; i < b.params.size(); ++i) {
    auto& p = b.params[i];
    auto avg = b.slot(i).view_as(p);
    if (p.grad().defined() && !p.grad().is_sparse()) p.mutable_grad().copy_(avg);
    else p.mutable_grad() = avg.clone();
    if (b.copies[i].defined()) b.copies[i].mutable_grad() = torch::Tensor();  // now in the master's, averaged
  }
  b.communicate = false;
  stats_.steps += 1;
  stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace prism
