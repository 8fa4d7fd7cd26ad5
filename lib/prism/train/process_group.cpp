// ProcessGroup: the c10d process group (rendezvous through a TCPStore, Gloo on the
// CPU, NCCL on CUDA), its broadcast and all-reduces, and failure reporting between
// ranks. The one file that sees c10d's headers (PRISM_HAVE_DISTRIBUTED).
#include "prism/train/distributed.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "prism/error.h"
#include "prism/train/distributed_internal.h"

#ifdef PRISM_HAVE_DISTRIBUTED
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef PRISM_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#endif

namespace prism {

bool distributed_available() {
#ifdef PRISM_HAVE_DISTRIBUTED
  return true;
#else
  return false;
#endif
}

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
      if (const char* ifs = dist::env("GLOO_SOCKET_IFNAME")) {
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


}  // namespace prism
