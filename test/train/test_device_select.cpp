// Which GPU each rank takes (issue 20 item 3): a pure function of the launcher's
// environment and of how many CUDA devices the process sees, so every launch
// layout is checked here without a GPU. The environment goes through
// read_distributed_env, as in `prism train`.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "prism/train/distributed.h"

using prism::pick_cuda_device;

namespace {

// Reads the launcher environment made of exactly these variables (every other
// launcher variable unset), then puts the process environment back as it was:
// CUDA_VISIBLE_DEVICES must not change under later tests on a GPU machine.
prism::DistributedEnv launch_env(const std::map<std::string, std::string>& vars) {
  std::map<std::string, std::optional<std::string>> saved;
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST", "SLURM_NTASKS_PER_NODE",
                        "SLURM_GPUS_PER_TASK", "CUDA_VISIBLE_DEVICES", "TORCHELASTIC_USE_AGENT_STORE"}) {
    const char* old = std::getenv(v);
    saved[v] = old ? std::optional<std::string>(old) : std::nullopt;
    unsetenv(v);
  }
  for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  auto e = prism::read_distributed_env();
  for (const auto& [k, v] : saved) {
    if (v) setenv(k.c_str(), v->c_str(), 1);
    else unsetenv(k.c_str());
  }
  return e;
}

std::map<std::string, std::string> torchrun(int rank, int world, int local_rank, int local_world) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

std::map<std::string, std::string> slurm(int procid, int ntasks, int localid, int per_node) {
  return {{"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_NTASKS", std::to_string(ntasks)},
          {"SLURM_LOCALID", std::to_string(localid)},
          {"SLURM_NTASKS_PER_NODE", std::to_string(per_node)},
          {"SLURM_JOB_NODELIST", "gpu[01-02]"}};
}

}  // namespace

TEST_CASE("one process takes device 0 whatever it sees", "[ddp][device]") {
  auto e = launch_env({});
  CHECK(pick_cuda_device(e, 1).index == 0);
  CHECK(pick_cuda_device(e, 8).index == 0);
  e = launch_env({{"CUDA_VISIBLE_DEVICES", "5"}});
  auto p = pick_cuda_device(e, 1);
  CHECK(p.index == 0);
  CHECK_THAT(p.why, Catch::Contains("CUDA_VISIBLE_DEVICES=5"));
}

TEST_CASE("torchrun: each local rank takes the GPU of its LOCAL_RANK", "[ddp][device]") {
  for (int local = 0; local < 8; ++local) {
    // Second node of two: global rank 8 + local.
    auto e = launch_env(torchrun(8 + local, 16, local, 8));
    auto p = pick_cuda_device(e, 8);
    CHECK(p.index == local);
    CHECK_THAT(p.why, Catch::Contains("LOCAL_RANK " + std::to_string(local)));
  }
}

TEST_CASE("Slurm with per-task GPU binding: every task sees one GPU, numbered 0", "[ddp][device]") {
  // srun --ntasks-per-node=4 --gpus-per-task=1: task 3 sees only its own GPU (the host's 3rd).
  for (int local = 0; local < 4; ++local) {
    auto vars = slurm(4 + local, 8, local, 4);
    vars["SLURM_GPUS_PER_TASK"] = "1";
    vars["CUDA_VISIBLE_DEVICES"] = std::to_string(local);
    auto e = launch_env(vars);
    CHECK(e.gpus_per_task == 1);
    CHECK(pick_cuda_device(e, 1).index == 0);  // cuda:LOCAL_RANK would be "invalid device ordinal"
  }
  // --gpu-bind=single:1 without --gpus-per-task: still one visible device.
  auto e = launch_env(slurm(1, 2, 1, 2));
  CHECK(pick_cuda_device(e, 1).index == 0);
}

TEST_CASE("Slurm giving each task several GPUs of its own: a task past the count takes its first", "[ddp][device]") {
  auto vars = slurm(3, 4, 3, 4);
  vars["SLURM_GPUS_PER_TASK"] = "h100:2";  // type:count
  auto e = launch_env(vars);
  CHECK(e.gpus_per_task == 2);
  CHECK(pick_cuda_device(e, 2).index == 0);
  // ...and a task within the count keeps its LOCAL_RANK, which is one of its own GPUs.
  vars = slurm(1, 4, 1, 4);
  vars["SLURM_GPUS_PER_TASK"] = "2";
  CHECK(pick_cuda_device(launch_env(vars), 2).index == 1);
}

TEST_CASE("Slurm where every task sees all of the host's GPUs: LOCAL_RANK", "[ddp][device]") {
  for (int local = 0; local < 4; ++local) CHECK(pick_cuda_device(launch_env(slurm(local, 4, local, 4)), 4).index == local);
}

TEST_CASE("more local ranks than visible GPUs is an error naming the rank, the count and the fix", "[ddp][device]") {
  auto e = launch_env(torchrun(3, 4, 3, 4));
  CHECK_THROWS_WITH(pick_cuda_device(e, 2), Catch::Contains("LOCAL_RANK 3") && Catch::Contains("only 2") &&
                                                Catch::Contains("rank 3 of 4") && Catch::Contains("Fix:") &&
                                                Catch::Contains("--gpus-per-task=1"));
  // Slurm without per-task binding is the same mistake.
  CHECK_THROWS_WITH(pick_cuda_device(launch_env(slurm(2, 4, 2, 4)), 2), Catch::Contains("LOCAL_RANK 2"));
  // No device at all.
  CHECK_THROWS_WITH(pick_cuda_device(launch_env(torchrun(0, 2, 0, 2)), 0), Catch::Contains("no CUDA device"));
}

TEST_CASE("a CPU run is never moved to a GPU", "[ddp][device]") {
  auto e = launch_env(torchrun(1, 2, 1, 2));
  CHECK(prism::bind_rank_device(e, torch::kCPU) == torch::Device(torch::kCPU));
}
