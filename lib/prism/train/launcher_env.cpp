// Who this process is and where it computes, from the launcher's environment
// (torchrun or Slurm): read_distributed_env, pick_cuda_device, bind_rank_device and
// distributed_timeout. Plain parsing: nothing here depends on c10d.
#include "prism/train/distributed.h"

#include <fmt/format.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "prism/error.h"
#include "prism/train/distributed_internal.h"

namespace prism {

const char* dist::env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

using dist::env;

namespace {

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

}  // namespace prism
