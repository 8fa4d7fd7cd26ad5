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

#include "prism/format.h"
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
  const double flops = 2.0 * static_cast<double>(a.size(0)) * static_cast<double>(a.size(1)) * static_cast<double>(b.size(1));
  return std::max(best, flops / s / 1e9);
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

// `rounds` rounds of one fp32 and one bf16 n^3 matmul, taking turns (a change in load hits both), after one warm call each.
MatmulRates rates_at(int64_t m, int64_t k, int64_t n, int rounds) {
  // A generator of its own: drawing from the default one would move a run's random stream (dropout,
  // initialisation) by whether this probe ran or its rates came from the machine cache, and a
  // resumed run would no longer reproduce the uninterrupted one.
  auto gen = at::detail::createCPUGenerator(0);
  const auto a = torch::randn({m, k}, gen), b = torch::randn({k, n}, gen);
  const auto a16 = a.to(torch::kBFloat16), b16 = b.to(torch::kBFloat16);
  torch::mm(a, b);  // warm: first-touch pages, oneDNN's kernel selection
  torch::mm(a16, b16);
  MatmulRates r;
  r.n = n;
  for (int i = 0; i < rounds; ++i) {
    r.fp32_gflops = best_gflops(a, b, r.fp32_gflops);
    r.bf16_gflops = best_gflops(a16, b16, r.bf16_gflops);
  }
  return r;
}

}  // namespace

MatmulRates measure_matmul_rates(int64_t n, int rounds) {
  torch::NoGradGuard no_grad;
  // An emulated bf16 matmul of 1024^3 takes seconds (0.3 GFLOP/s on an AVX2 EPYC): a small
  // round first, which already tells emulated bf16 (its ratio is 0.004-0.08) from native.
  const int64_t s = std::min<int64_t>(n, 256);
  const MatmulRates small = rates_at(s, s, s, 2);
  if (small.n == n || small.bf16_over_fp32() < kBf16EmulatedBelow) return small;
  return rates_at(n, n, n, rounds);
}

CpuDtypeChoice decide_cpu_dtype(const MatmulRates& rates, bool native_bf16) {
  CpuDtypeChoice c;
  c.rates = rates;
  if (!native_bf16) {
    c.reason = "auto -> fp32: this CPU has no native bf16 (AVX512-BF16 or AMX, not capped by ONEDNN_MAX_CPU_ISA), so "
               "bf16 matmuls would take a slow fallback";
    return c;
  }
  const double speedup = rates.bf16_over_fp32();
  c.bf16 = speedup >= kBf16MinSpeedup;
  c.reason = fmt::format(
      "auto -> {}: bf16 matmuls ran {:.2f}x fp32's here ({}^3: bf16 {:.0f}, fp32 {:.0f} GFLOP/s){}", c.bf16 ? "bf16" : "fp32",
      speedup, rates.n, rates.bf16_gflops, rates.fp32_gflops,
      c.bf16                                  ? ""
      : bf16_emulated(rates, native_bf16) ? "; no fast bf16 path here (the ISA capped, or LibTorch's fallback)"
                                          : fmt::format("; bf16 is picked from {:.1f}x (its steps also cast)", kBf16MinSpeedup));
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

namespace {

// This CPU's rates at the current thread count, from the cache or measured now; `note` says which.
MatmulRates rates_here(bool& cached, std::string& note) {
  const std::string path = cpu_dtype_cache_path(), key = cpu_dtype_cache_key();
  if (const auto rates = cached_rates(read_machine_cache(path), key)) {
    cached = true;
    note = fmt::format(" [measured before, cached in {}]", path);
    return *rates;
  }
  cached = false;
  const MatmulRates r = measure_matmul_rates();
  try {
    write_cache(path, key, r);
    note = fmt::format(" [measured now, cached in {}]", path);
  } catch (const std::exception& e) {
    note = fmt::format(" [measured now; not cached: {}]", e.what());
  }
  return r;
}

}  // namespace

MatmulRates cpu_matmul_rates() {
  bool cached = false;
  std::string note;
  return rates_here(cached, note);
}

bool bf16_emulated(const MatmulRates& rates, bool native_bf16) {
  return !native_bf16 || (rates.fp32_gflops > 0 && rates.bf16_over_fp32() < kBf16EmulatedBelow);
}

CpuDtypeChoice choose_cpu_dtype() {
  if (!cpu_supports_bf16()) return decide_cpu_dtype({}, false);
  bool cached = false;
  std::string note;
  const MatmulRates rates = rates_here(cached, note);
  CpuDtypeChoice c = decide_cpu_dtype(rates, true);
  c.cached = cached;
  c.reason += note;
  return c;
}

MatmulRates measure_step_matmul_rates(const StepWork& w) {
  torch::NoGradGuard no_grad;
  const int64_t d = std::max<int64_t>(w.d_model, 1);
  // ~3e8 FLOPs a call: ~0.1 s where bf16 is emulated (1-3 GFLOP/s measured at these shapes).
  const int64_t rows = std::clamp<int64_t>(static_cast<int64_t>(3e8 / (8.0 * d * d)), 64, std::max<int64_t>(w.rows, 64));
  MatmulRates r = rates_at(rows, d, 4 * d, 2);
  r.n = 0;
  return r;
}

std::string format_slow_bf16_warning(const MatmulRates& here, bool native_bf16, const MatmulRates& at_shape,
                                     const StepWork& w) {
  if (!(here.fp32_gflops > 0) || here.bf16_over_fp32() >= 1.0) return "";
  const double total = w.flops * static_cast<double>(w.steps) + w.eval_flops;
  auto eta = [&](double gflops) { return gflops > 0 ? format_duration(total / (gflops * 1e9)) : "?"; };
  return fmt::format(
      "warning: train.dtype is bf16, and this CPU multiplies bf16 {:.3g}x as fast as fp32 ({}^3 matmuls: bf16 {:.3g}, "
      "fp32 {:.3g} GFLOP/s; {}). {} steps{} would take about {} in bf16 against about {} in fp32 (the step's FLOPs at "
      "the rates of this model's matmuls, bf16 {:.3g} and fp32 {:.3g} GFLOP/s; the log's ETA follows the real steps). "
      "Fix: train.dtype=auto (measures and picks the faster dtype here) or train.dtype=fp32; prism report keeps runs "
      "of different dtypes apart, as another study",
      here.bf16_over_fp32(), here.n, here.bf16_gflops, here.fp32_gflops,
      bf16_emulated(here, native_bf16) ? "no fast bf16 path here: LibTorch emulates it" : "native bf16, but slower",
      w.steps, w.evals > 0 ? fmt::format(" and {} validation{}", w.evals, w.evals == 1 ? "" : "s") : "",
      eta(at_shape.bf16_gflops), eta(at_shape.fp32_gflops), at_shape.bf16_gflops, at_shape.fp32_gflops);
}

std::string slow_bf16_warning(const StepWork& w) {
  const MatmulRates here = cpu_matmul_rates();
  if (here.bf16_over_fp32() >= 1.0) return "";
  return format_slow_bf16_warning(here, cpu_supports_bf16(), measure_step_matmul_rates(w), w);
}

}  // namespace prism
