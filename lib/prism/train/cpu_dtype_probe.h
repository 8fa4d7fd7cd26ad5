#pragma once
// `train.dtype: auto` on the CPU: bf16 or fp32, whichever this machine multiplies
// faster. Native bf16 instructions (AVX512-BF16, AMX) do not make bf16 the faster
// dtype: on an Intel Xeon with AVX512-BF16 and no AMX, LibTorch's bf16 matmuls
// peaked at half its fp32 rate, and a cpu-128 training step ran 0.83x fp32's.
// So `auto` measures: a short probe of square matmuls in both dtypes, rounds taking
// turns, best of each. The result is cached per CPU model, LibTorch version and
// CPU capability, ISA caps and thread count (a JSON file, cpu_dtype_cache_path()),
// so a machine pays the probe (~0.2 s) once.
#include <cstdint>
#include <string>

namespace prism {

struct MatmulRates {
  double fp32_gflops = 0, bf16_gflops = 0;  // best round of n x n x n matmuls
  int64_t n = 0;
};

struct CpuDtypeChoice {
  bool bf16 = false;
  MatmulRates rates;   // zero when not measured (no native bf16)
  bool cached = false;  // rates came from the cache
  std::string reason;  // one line: what was picked and why
};

// bf16 must multiply at least this much faster than fp32 to be picked: a bf16 step
// also casts activations and gradients, which an fp32 step does not.
constexpr double kBf16MinSpeedup = 1.2;

// Measures matmul rates here: `rounds` rounds of one fp32 and one bf16 n x n matmul each.
MatmulRates measure_matmul_rates(int64_t n = 1024, int rounds = 4);

// The decision for `rates` (and whether this CPU has native bf16 at all), with its reason.
CpuDtypeChoice decide_cpu_dtype(const MatmulRates& rates, bool native_bf16);

// `auto` on this CPU at the current LibTorch thread count: from the cache, or
// measured and cached. A cache that cannot be read or written is measured around
// (the reason says so); it never fails a run.
CpuDtypeChoice choose_cpu_dtype();

// $PRISM_CACHE_DIR, else $XDG_CACHE_HOME/prism, else $HOME/.cache/prism; then /cpu-dtype.json.
std::string cpu_dtype_cache_path();

// What the cache entry is keyed on: "CPU model | LibTorch version | capability | caps | N threads".
std::string cpu_dtype_cache_key();

}  // namespace prism
