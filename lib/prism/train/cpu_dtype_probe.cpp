#include "prism/train/cpu_dtype_probe.h"

#include <ATen/Context.h>
#include <ATen/Version.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>

#include "prism/machine_cache.h"
#include "prism/train/execution.h"

namespace prism {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

double best_gflops(const torch::Tensor& a, const torch::Tensor& b, double best) {
  const auto t0 = std::chrono::steady_clock::now();
  torch::mm(a, b);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double n = static_cast<double>(a.size(0));
  return std::max(best, 2.0 * n * n * n / s / 1e9);
}

std::optional<MatmulRates> cached_rates(const nlohmann::json& cache, const std::string& key) {
  const auto it = cache.find(key);
  if (it == cache.end() || !it->is_object()) return std::nullopt;
  MatmulRates r;
  r.fp32_gflops = it->value("fp32_gflops", 0.0);
  r.bf16_gflops = it->value("bf16_gflops", 0.0);
  r.n = it->value("n", int64_t{0});
  if (!(r.fp32_gflops > 0) || !(r.bf16_gflops > 0)) return std::nullopt;
  return r;
}

void write_cache(const std::string& path, const std::string& key, const MatmulRates& r) {
  write_machine_cache_entry(path, key, {{"fp32_gflops", r.fp32_gflops}, {"bf16_gflops", r.bf16_gflops}, {"n", r.n}});
}

}  // namespace

MatmulRates measure_matmul_rates(int64_t n, int rounds) {
  torch::NoGradGuard no_grad;
  const auto a = torch::randn({n, n}), b = torch::randn({n, n});
  const auto a16 = a.to(torch::kBFloat16), b16 = b.to(torch::kBFloat16);
  torch::mm(a, b);  // warm: first-touch pages, oneDNN's kernel selection
  torch::mm(a16, b16);
  MatmulRates r;
  r.n = n;
  for (int i = 0; i < rounds; ++i) {  // taking turns, so a change in load hits both
    r.fp32_gflops = best_gflops(a, b, r.fp32_gflops);
    r.bf16_gflops = best_gflops(a16, b16, r.bf16_gflops);
  }
  return r;
}

CpuDtypeChoice decide_cpu_dtype(const MatmulRates& rates, bool native_bf16) {
  CpuDtypeChoice c;
  c.rates = rates;
  if (!native_bf16) {
    c.reason = "auto -> fp32: this CPU has no native bf16 (AVX512-BF16 or AMX), so bf16 matmuls would take a slow fallback";
    return c;
  }
  const double speedup = rates.bf16_gflops / rates.fp32_gflops;
  c.bf16 = speedup >= kBf16MinSpeedup;
  c.reason = fmt::format(
      "auto -> {}: bf16 matmuls ran {:.2f}x fp32's here ({}^3: bf16 {:.0f}, fp32 {:.0f} GFLOP/s){}", c.bf16 ? "bf16" : "fp32",
      speedup, rates.n, rates.bf16_gflops, rates.fp32_gflops,
      c.bf16 ? "" : fmt::format("; bf16 is picked from {:.1f}x (its steps also cast)", kBf16MinSpeedup));
  return c;
}

std::string cpu_dtype_cache_path() { return machine_cache_file("cpu-dtype.json"); }

std::string cpu_dtype_cache_key() {
  std::string caps;
  for (const char* var : {"ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA"})
    if (const std::string v = env_or_empty(var); !v.empty()) caps += fmt::format(" {}={}", var, v);
  return fmt::format("{} | LibTorch {} | capability {}{} | {} threads", cpu_model_name(), TORCH_VERSION,
                     at::get_cpu_capability(), caps.empty() ? "" : " |" + caps, torch::get_num_threads());
}

CpuDtypeChoice choose_cpu_dtype() {
  if (!cpu_supports_bf16()) return decide_cpu_dtype({}, false);
  const std::string path = cpu_dtype_cache_path(), key = cpu_dtype_cache_key();
  if (const auto rates = cached_rates(read_machine_cache(path), key)) {
    CpuDtypeChoice c = decide_cpu_dtype(*rates, true);
    c.cached = true;
    c.reason += fmt::format(" [measured before, cached in {}]", path);
    return c;
  }
  CpuDtypeChoice c = decide_cpu_dtype(measure_matmul_rates(), true);
  try {
    write_cache(path, key, c.rates);
    c.reason += fmt::format(" [measured now, cached in {}]", path);
  } catch (const std::exception& e) {
    c.reason += fmt::format(" [measured now; not cached: {}]", e.what());
  }
  return c;
}

}  // namespace prism
