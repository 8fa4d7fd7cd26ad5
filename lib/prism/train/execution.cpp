#include "prism/train/execution.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "prism/model/placement.h"
#include "prism/train/cpu_dtype_probe.h"

namespace prism {

namespace {

// ONEDNN_MAX_CPU_ISA below AVX512_CORE_BF16 (e.g. AVX2, to stand in for an AVX2-only CPU) takes
// LibTorch's bf16 matmuls off their native path, whatever the CPU's flags say.
bool onednn_caps_bf16() {
  const char* v = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!v || !*v) return false;
  std::string isa(v);
  for (char& c : isa) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* ok : {"ALL", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16",
                         "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16"})
    if (isa == ok) return false;
  return true;
}

}  // namespace

bool cpu_supports_bf16() {
  if (onednn_caps_bf16()) return false;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    return line.find(" avx512_bf16") != std::string::npos || line.find(" amx_bf16") != std::string::npos;
  }
  return false;
}

std::string Execution::describe() const {
  return fmt::format("{}, {} thread{}, {}", device.str(), threads, threads == 1 ? "" : "s",
                     bf16 ? "bf16 autocast (fp32 master weights)" : tf32 ? "fp32 (TF32 matmuls)" : "fp32");
}

namespace {

void resolve_dtype(const std::string& dtype, Execution& e) {
  if (dtype != "auto") {
    e.bf16 = dtype == "bf16";
    e.dtype_reason = fmt::format("{}, as train.dtype says", dtype);
  } else if (e.device.is_cuda()) {
    e.bf16 = true;
    e.dtype_reason = "auto -> bf16 on a GPU";
  } else {
    const CpuDtypeChoice c = choose_cpu_dtype();
    e.bf16 = c.bf16;
    e.dtype_reason = c.reason;
  }
}

}  // namespace

Execution resolve_execution(const TrainConfig& t) {
  Execution e;
  e.device = resolve_device(t.device, "train.device");
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  e.threads = t.threads > 0 ? t.threads : cores;
  torch::set_num_threads(e.threads);
  e.threads = torch::get_num_threads();
  resolve_dtype(t.dtype, e);
  // fp32 matmuls on a GPU run as TF32 (10-bit mantissa products, fp32 accumulation), as
  // PyTorch's float32_matmul_precision("high"); NVIDIA_TF32_OVERRIDE=0 turns it off.
  e.tf32 = e.device.is_cuda();
  if (e.tf32) at::globalContext().setAllowTF32CuBLAS(true);
  return e;
}

AutocastScope::AutocastScope(const Execution& e) : active_(e.bf16), type_(e.device.type()) {
  if (!active_) return;
  at::autocast::set_autocast_dtype(type_, at::kBFloat16);
  at::autocast::set_autocast_enabled(type_, true);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  at::autocast::set_autocast_enabled(type_, false);
  at::autocast::clear_cache();
}

}  // namespace prism
