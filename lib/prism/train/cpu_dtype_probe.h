#pragma once
// bf16 or fp32 on the CPU, by measurement. Native bf16 instructions (AVX512-BF16,
// AMX) do not make bf16 the faster dtype: on an Intel Xeon with AVX512-BF16 and no
// AMX, LibTorch's bf16 matmuls peaked at half its fp32 rate, and a cpu-128 training
// step ran 0.83x fp32's. Without them (an AVX2-only EPYC, or the ISA capped with
// ONEDNN_MAX_CPU_ISA=AVX2) LibTorch emulates bf16: its matmuls ran 0.3-3 GFLOP/s
// against fp32's 35-75, and a training step 14x slower.
// So the rates are measured: a short probe of square matmuls in both dtypes, rounds
// taking turns, best of each; a first small round (256^3) ends the probe when bf16
// is emulated, so an emulated probe costs ~0.2 s, not the 30 s of 1024^3 calls. The
// result is cached per CPU model, LibTorch version and CPU capability, ISA caps and
// thread count (a JSON file, cpu_dtype_cache_path()), so a machine pays it once.
// Used by `train.dtype: auto`, by the warning a run in bf16 gives where bf16 is
// slower, and by the benchmarks, which leave emulated bf16 out by default.
#include <cstdint>
#include <string>

namespace prism {

struct MatmulRates {
  double fp32_gflops = 0, bf16_gflops = 0;  // best round of n x n x n matmuls
  int64_t n = 0;
  double bf16_over_fp32() const { return fp32_gflops > 0 ? bf16_gflops / fp32_gflops : 0; }
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

// Below this bf16/fp32 matmul ratio bf16 counts as emulated (no fast path here):
// native bf16 measured 0.5x fp32 at worst (the Xeon above), emulated 0.004-0.08x.
constexpr double kBf16EmulatedBelow = 0.25;

// Measures matmul rates here: `rounds` rounds of one fp32 and one bf16 n x n matmul
// each, after one round at 256^3 that stops the probe (its rates returned, n = 256)
// when bf16 runs below kBf16EmulatedBelow of fp32.
MatmulRates measure_matmul_rates(int64_t n = 1024, int rounds = 4);

// The decision for `rates` (and whether this CPU has native bf16 at all), with its reason.
CpuDtypeChoice decide_cpu_dtype(const MatmulRates& rates, bool native_bf16);

// `auto` on this CPU at the current LibTorch thread count: from the cache, or
// measured and cached. A cache that cannot be read or written is measured around
// (the reason says so); it never fails a run.
CpuDtypeChoice choose_cpu_dtype();

// This CPU's measured matmul rates at the current thread count, whatever its flags
// say (cached as choose_cpu_dtype's are): what a run or benchmark asked for bf16 is
// checked against.
MatmulRates cpu_matmul_rates();

// bf16 on this CPU runs without a fast path: no native bf16 instructions, or
// measured below kBf16EmulatedBelow of fp32 (ISA capped, or a fallback).
bool bf16_emulated(const MatmulRates& rates, bool native_bf16);

// What a run's steps multiply, for the ETA of the warning below.
struct StepWork {
  int64_t d_model = 0;  // the MLP's matmuls: [rows x d_model] x [d_model x 4 d_model]
  int64_t rows = 0;     // tokens per micro-batch
  double flops = 0;     // training FLOPs per optimizer step
  int64_t steps = 0;    // steps to run
  double eval_flops = 0;  // the validations' forward FLOPs over the whole run
  int64_t evals = 0;      // how many validations
};

// Rates of one fp32 and one bf16 matmul of the shape `w` multiplies most (rows capped
// so that an emulated bf16 call stays near 0.1 s): what the warning's ETAs rest on.
MatmulRates measure_step_matmul_rates(const StepWork& w);

// A run in bf16 on a CPU whose bf16 matmuls run slower than fp32 (`here`, cpu_matmul_rates()):
// the warning, with the measured ratio, the ETA in both dtypes (the step's FLOPs at
// `at_shape`'s rates) and the override that fixes it. "" where bf16 is not slower here.
std::string format_slow_bf16_warning(const MatmulRates& here, bool native_bf16, const MatmulRates& at_shape,
                                     const StepWork& w);

// The same, measured here: "" without a probe at the step's shape where bf16 is not slower.
std::string slow_bf16_warning(const StepWork& w);

// $PRISM_CACHE_DIR, else $XDG_CACHE_HOME/prism, else $HOME/.cache/prism; then /cpu-dtype.json.
std::string cpu_dtype_cache_path();

// What the cache entry is keyed on: "CPU model | LibTorch version | capability | caps | N threads".
std::string cpu_dtype_cache_key();

}  // namespace prism
