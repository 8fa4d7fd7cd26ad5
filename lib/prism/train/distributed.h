#pragma once
// Data parallelism across processes on PyTorch's c10d: the process group from
// the launcher's environment (torchrun or Slurm's srun), rendezvous through a
// TCPStore, Gloo on the CPU and NCCL on CUDA; broadcast and reductions for the
// trainer; and GradientSync, which averages gradients with bucketed
// all-reduces launched from autograd hooks while the backward is still running.
//
// At world size 1 nothing here talks to c10d and the trainer takes its
// single-process path unchanged. Builds whose LibTorch lacks c10d Gloo (or
// without gloo's headers) have PRISM_HAVE_DISTRIBUTED undefined; there
// ProcessGroup::from_environment refuses a world size above 1.
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "prism/error.h"
#include "prism/model/working_copies.h"

namespace prism {

// Whether this build can train across processes (LibTorch's c10d with Gloo).
bool distributed_available();

// Who this process is, read from the environment a launcher sets.
struct DistributedEnv {
  int rank = 0, world_size = 1, local_rank = 0;
  int local_world_size = 1;       // processes on this host (LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE; else world_size)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "none";  // torchrun (RANK/WORLD_SIZE/...) | slurm (SLURM_PROCID/...) | none
  bool agent_store = false;       // torchrun's agent hosts the TCPStore (TORCHELASTIC_USE_AGENT_STORE)
  int gpus_per_task = 0;          // SLURM_GPUS_PER_TASK: Slurm gave each task its own GPUs (0: not said)
  std::string visible_devices;    // CUDA_VISIBLE_DEVICES as set ("" when unset), for messages
};

// RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT win; else SLURM_PROCID/
// SLURM_NTASKS/SLURM_LOCALID with MASTER_ADDR (default: the first host of
// SLURM_JOB_NODELIST when it is a plain name) and MASTER_PORT (default 29500).
// Throws prism::Error naming the variable for malformed or inconsistent values.
DistributedEnv read_distributed_env();

// The CUDA device a process uses, from who it is and how many devices it sees
// (torch::cuda::device_count(), which CUDA_VISIBLE_DEVICES already narrowed):
//   - one process, or one visible device: device 0. A Slurm task bound to its
//     own GPU (--gpus-per-task=1, --gpu-bind=single:1, map_gpu) sees just that
//     one, numbered 0, whatever its LOCAL_RANK;
//   - several visible: LOCAL_RANK (torchrun; or Slurm where every task on a
//     host sees all of the host's GPUs);
//   - LOCAL_RANK beyond what is visible: device 0 when Slurm gave each task
//     its own GPUs (SLURM_GPUS_PER_TASK), else prism::Error (ranks would share
//     or miss a GPU).
// A pure function of its inputs, so every launch layout is testable without a GPU.
struct CudaDevicePick {
  int index = 0;
  std::string why;  // "LOCAL_RANK 1 of 2 visible GPUs"
};
CudaDevicePick pick_cuda_device(const DistributedEnv& env, int visible_devices);

// Where this rank computes: for CUDA, the device pick_cuda_device chooses, made
// current (as torch.cuda.set_device) so NCCL, the caching allocator and every
// kernel without an explicit device land on it. Call it before the process
// group exists: NCCL binds its communicator to the current device. A CPU
// device comes back unchanged.
torch::Device bind_rank_device(const DistributedEnv& env, torch::Device requested);

// How long a collective or the rendezvous may wait for the other ranks before
// failing: PRISM_DIST_TIMEOUT seconds (default 300). A launch setting, not part
// of the experiment, so it lives in the environment rather than the config.
std::chrono::milliseconds distributed_timeout();

class ProcessGroup {
 public:
  // The group of this process: world size 1 (no c10d at all) when no launcher
  // variables are set. Otherwise rendezvous at MASTER_ADDR:MASTER_PORT and a
  // Gloo (CPU) or NCCL (CUDA) backend; throws prism::Error when it fails.
  static std::shared_ptr<ProcessGroup> from_environment(torch::Device device);
  static std::shared_ptr<ProcessGroup> single();  // world size 1
  ~ProcessGroup();

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_root() const { return env_.rank == 0; }
  bool distributed() const { return env_.world_size > 1; }
  const DistributedEnv& env() const { return env_; }
  std::string describe() const;  // "2 processes (torchrun), gloo over 127.0.0.1:29500"

  // Copies rank 0's values into `tensors` on every rank (one flat message).
  void broadcast(const std::vector<torch::Tensor>& tensors);
  // In-place sum over ranks of a tensor on this group's device.
  void all_reduce_sum(torch::Tensor& t);
  // The mean over ranks of a number (e.g. a loss), and whether any rank says yes.
  double mean(double v);
  bool any(bool v);

  // Launches an asynchronous in-place sum; wait() returns once it has landed.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
  };
  std::unique_ptr<Pending> all_reduce_sum_async(torch::Tensor t);

  // Wraps a communication failure (a rank died or hung) as prism::Error that
  // names this rank, the group and the fix. When the rank that broke off had
  // posted why (report_failure), the error is that reason instead.
  [[noreturn]] void fail(const std::string& during, const std::string& why) const;

  // This rank stops on its own error (not a lost peer): posts it in the
  // rendezvous store so that the other ranks, whose next collective breaks,
  // report "rank 0 failed: <why>" and not only that they lost a peer. Rank 0,
  // which hosts the store, then closes its connections (the others stop
  // waiting at once) and waits, at most PRISM_DIST_TIMEOUT, until every other
  // rank has read the reason. No collective may follow. No-op at world size 1.
  void report_failure(const Error& error);

  struct Backend;

 private:
  ProcessGroup() = default;
  DistributedEnv env_;
  torch::Device device_ = torch::kCPU;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<Backend> backend_;
  mutable bool peer_lost_ = false;  // fail() ran: this rank's error is another's, nothing to post
};

// Averages parameter gradients over the ranks, DDP-style. Parameters are
// grouped in reverse registration order (about the order the backward produces
// their gradients) into buckets of ~bucket_bytes (the first one small, as DDP
// does, so communication starts early). A hook after each gradient's
// accumulation copies it into its bucket; a full bucket is all-reduced
// asynchronously at once, in bucket order on every rank, while the backward
// continues. Only micro-steps marked `communicate` (the last of a gradient
// accumulation) do any of this; earlier ones only accumulate locally.
//
// Why own hooks rather than c10d::Reducer: the Reducer's constructor and
// protocol (prepare_for_backward, bucket rebuilding, the Python DDP wrapper's
// bookkeeping) are internal and change between releases, while
// post-accumulate-grad hooks and Backend::allreduce are stable; our needs
// (dense, fixed-shape, all parameters used) fit in a page.
class GradientSync {
 public:
  GradientSync(std::shared_ptr<ProcessGroup> group, std::vector<torch::Tensor> params,
               int64_t bucket_bytes = 25 << 20, int64_t first_bucket_bytes = 1 << 20);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // bf16 training on working copies (prism/model/working_copies.h): a weight
  // with a copy gets its gradient there (bf16), and the token embedding on its
  // master as well (the lookup's sparse rows). Its slot then waits for each and
  // holds their sum in fp32; finish() writes the average into the master's
  // .grad (fp32, dense) and clears the copy's, which the optimizer then reads.
  // The reduction stays in fp32, as under autocast. Call again with the same
  // copies: nothing to do.
  void use_working_copies(const WorkingCopies& copies);

  // Before each micro-step's backward: whether this one communicates.
  void prepare(bool communicate);
  // After the communicating backward: waits for every bucket and writes the
  // averaged gradients back into .grad.
  void finish();

  struct Stats {
    int64_t steps = 0;
    int64_t bytes = 0;         // payload all-reduced (per rank, per step: the gradient bytes)
    double wait_s = 0;         // time finish() spent waiting for communication
    int64_t buckets = 0;
  };
  const Stats& stats() const { return stats_; }
  int64_t bucket_count() const;
  ProcessGroup& group() const;

  struct Buckets;

 private:
  std::shared_ptr<Buckets> b_;
  Stats stats_;
};

}  // namespace prism
