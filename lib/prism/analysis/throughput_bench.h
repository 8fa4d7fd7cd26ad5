#pragma once
// Training throughput of a schedule against uniform for the study report,
// measured by the report itself, in its own process: the uniform model's and the
// schedule's training steps taking turns (train/turn_timing.h, the timing core of
// `prism bench train`, so load from other processes falls on both alike), on the
// study's model, vocabulary, batch and sequence length. The runs' own training
// times are not used: runs that shared a machine, or ran on different ones,
// measure the load and the machine, not the schedule.
#include <cstdint>
#include <string>

namespace prism {

struct BenchRequest {
  std::string model;           // a model preset (prism bench train --model)
  int64_t vocab = 0;           // vocabulary size (0: the preset's)
  std::string heads;           // the schedule, compact form
  int64_t batch = 0, seq = 0;  // micro-batch B and sequence length T
  std::string dtype;           // fp32 | bf16
  int threads = 1;
  int steps = 20, warmup = 3;  // timed steps per arm, untimed warm-up steps
};

struct BenchResult {
  double uniform_tokens_per_s = 0, tokens_per_s = 0;
  double ratio = 0;            // schedule / uniform tokens/s: the median of the paired step-time ratios
  double ratio_lo = 0, ratio_hi = 0;  // its 95% interval (order statistics); NaN below 6 steps
  std::string machine;         // the bench's own description of the machine
  std::string command;         // what ran
};

// The `prism bench train` command that makes the same measurement (`prism` the binary;
// --clock cpu: process CPU time, steadier on a shared machine; --compare none: no PyTorch
// reference loops): what the report prints beside the figure.
std::string bench_command(const BenchRequest& r, const std::string& prism);

// Times r.steps paired steps after r.warmup (process CPU time) at r.threads intra-op threads
// (restored after). Throws prism::Error for a model preset, schedule or shape it cannot build.
BenchResult run_bench_train(const BenchRequest& r);

}  // namespace prism
