#pragma once
// Training throughput of a schedule against uniform for the study report,
// measured by the report itself: `prism bench train` run here, in one process
// per schedule, with the uniform model's and the schedule's training steps
// taking turns (so load from other processes falls on both alike), on the
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

// The command line (`prism` the binary; --clock cpu: process CPU time, steadier
// on a shared machine; --compare none: no PyTorch reference loops).
std::string bench_command(const BenchRequest& r, const std::string& prism);

// Reads `prism bench train`'s table: the uniform row, the schedule's row
// (tokens/s and "vs uniform") and the machine line. Throws prism::Error naming
// what is missing.
BenchResult parse_bench_train(const std::string& output, const std::string& heads, const std::string& dtype);

// Runs the bench (prism: "" for this executable) and parses it. Throws
// prism::Error with the bench's output when it fails.
BenchResult run_bench_train(const BenchRequest& r, const std::string& prism);

}  // namespace prism
