#pragma once
// Where and how a run executes: device, intra-op threads, bf16 autocast.
#include <torch/torch.h>

#include <string>

#include "prism/config/train_config.h"

namespace prism {

struct Execution {
  torch::Device device = torch::kCPU;
  bool bf16 = false;  // autocast matmuls to bf16, fp32 master weights
  bool tf32 = false;  // fp32 matmuls as TF32 (CUDA)
  int threads = 1;    // LibTorch intra-op threads in use
  std::string dtype_reason;  // why bf16 or fp32: train.dtype as given, or what `auto` measured
  std::string describe() const;  // "cpu, 2 threads, bf16 autocast"
};

// Resolves train.device / train.dtype / train.threads, sets the thread count
// (LibTorch may start with one) and returns what is in effect. dtype auto: bf16 on
// a GPU; on the CPU the faster of bf16 and fp32 here, measured (cpu_dtype_probe.h).
Execution resolve_execution(const TrainConfig& t);

// Whether this machine's CPU runs bf16 matmuls natively (AVX512-BF16 or AMX), and
// ONEDNN_MAX_CPU_ISA does not cap LibTorch's matmuls below them.
bool cpu_supports_bf16();

// Enables autocast for the execution's device while alive (no-op for fp32).
class AutocastScope {
 public:
  explicit AutocastScope(const Execution& e);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_;
  c10::DeviceType type_;
};

}  // namespace prism
