#pragma once
// One layer's causal self-attention, forward + backward, timed for each back
// end in the same process (the measurements behind `prism bench attention`),
// with a correctness check of every back end's output, gradients and distance
// against the reference run on the same inputs.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace prism::attention {

// "reference", "sdpa", "fused" and "fused+distance" (the fused kernel with the
// distance telemetry on).
const std::vector<std::string>& bench_backend_names();

struct BenchCase {
  int64_t B = 1, T = 1024, H = 12, D = 64;
  torch::ScalarType dtype = torch::kFloat;
};

struct BenchSettings {
  std::vector<std::string> backends = bench_backend_names();
  int repeat = 5;                     // timed rounds, after one warm-up round
  double reference_limit_gib = 6.0;   // skip the reference where its T x T buffers would exceed this
  bool cpu_clock = false;             // process CPU time instead of wall-clock time
  std::string code_path;              // the fused kernel's code path ("" = its default)
  bool check = true;                  // compare outputs and gradients against the reference
};

struct BackendRun {
  bool ran = false;
  std::string skipped;         // why not, when it did not run
  std::vector<double> rounds;  // forward + backward per timed round, ms
  double ms = 0.0;             // their median
  double peak_mib = 0.0;       // peak extra CPU memory of the warm-up round
  // The correctness check (warm-up round): largest relative error (Frobenius
  // norm) over out, dq, dk, dv and distance against `checked_against`.
  std::string checked_against;  // "reference", "sdpa" (when the reference was skipped), or "" (not checked)
  double error = 0.0;
  std::string worst;           // which tensor had it
  bool correct = true;
};

// Back ends taking turns in every round (one warm-up round, then `repeat`
// timed ones), so load from other processes spreads over all of them. Inputs:
// strided q, k, v views of one (B, T, 3, H, D) tensor, as the model makes them.
// Needs CpuAllocationTracker::install() for the peak memory figures.
std::map<std::string, BackendRun> bench_attention_case(const BenchCase& c, const BenchSettings& s);

// Median over rounds of a's time over base's in the same round.
double paired_ratio(const BackendRun& a, const BackendRun& base);

// The reference's peak T x T memory for a case, GiB (about three fp32 B H T^2 tensors).
double reference_estimate_gib(const BenchCase& c);

// Tolerance of the correctness check: relative Frobenius error, 1e-4 for
// fp32 inputs and 2e-2 for bf16 (both sides round differently to bf16).
double bench_check_tolerance(torch::ScalarType dtype);

}  // namespace prism::attention
