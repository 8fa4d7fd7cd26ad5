#pragma once
// The measurements of prism-device-bench (scripts/device-check.sh runs each) and
// their shared options. Every function returns 0 when all its cases ran and met
// their bar, and records one JSON line per case through Report.
#include <string>
#include <vector>

#include "report.h"

namespace prism::device_bench {

struct BenchOptions {
  bool quick = false;                  // fewer tokens and runs: a smoke test, not a measurement
  bool small = false;                  // smoke: the smallest case (for compute-sanitizer)
  int repeat = 1;                      // attention/loss: time every case this many times (shows the noise)
  std::string backend = "auto";        // attention back end of the training runs
  int steps = 10;                      // timed training steps (after warm-up)
  std::vector<int> batches{16};        // training micro-batches
  std::vector<std::string> schedules{"uniform", "prism"};
  std::string dtype = "bf16";          // training: bf16 (autocast) | fp32
  std::vector<std::string> tf32{"on"}; // fp32 training: TF32 matmuls on and/or off
};

// One small causal attention case, forward and backward with distance, against
// float64; synchronises and checks for CUDA errors. The case compute-sanitizer runs.
int run_smoke(const BenchOptions& opt, const Report& report);

// The kernel against float64 at every head dim (32..256) and T up to 4096: out,
// dq, dk, dv and distance, bf16 (and fp32 at T 1024).
int run_check(const BenchOptions& opt, const Report& report);

// Prism's CUDA kernel vs SDPA flash, d_h 64/128/256, T 1024/4096, bf16: forward,
// backward, forward+backward, with distance on and off.
int run_attention_bench(const BenchOptions& opt, const Report& report);

// The LM-head loss at the 124M shape: plain linear + cross_entropy against the
// chunked fused loss, forward+backward under bf16 autocast, time and peak memory.
int run_loss_bench(const BenchOptions& opt, const Report& report);

// 124M-shape GPT training steps (forward, backward, AdamW), Prism vs uniform heads,
// with tokens/s, MFU against the bf16 matmul peak measured first, and peak memory.
int run_train_bench(const BenchOptions& opt, const Report& report);

}  // namespace prism::device_bench
