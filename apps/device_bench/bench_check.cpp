// prism-device-bench smoke | check: the CUDA kernel against float64 attention math.
//   smoke  one small case (forward with distance, backward), then a device
//          synchronise and a check for sticky CUDA errors: the case the device
//          check launches first (20 s) and hands to compute-sanitizer
//   check  every head dim the kernel has an instance for, T up to 4096: out, dq,
//          dk, dv and distance against float64 (lse enters through the backward:
//          P = exp(S - lse) makes dq, dk and dv wrong when lse is)
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "benches.h"
#include "prism/ops/cuda/cuda_attention.h"
#include "reference.h"
#include "timing.h"

namespace prism::device_bench {

namespace {

struct Case {
  int64_t B, T, H, D;
  torch::ScalarType dtype;
};

struct Errors {
  double out = NAN, dq = NAN, dk = NAN, dv = NAN, distance = NAN;
  bool ok(double tol) const {
    // NaN compares false: a non-finite result never passes.
    return out < tol && dq < tol && dk < tol && dv < tol && distance < kDistanceTolerance;
  }
};

// Kernel and float64 on the same random q, k, v (strided views of one (B, T, 3, H, D) tensor, as the model makes them).
Errors compare(const Case& c, uint64_t seed) {
  torch::manual_seed(seed);
  auto opts = torch::dtype(torch::kFloat).device(torch::kCUDA);
  auto qkv = torch::randn({c.B, c.T, 3, c.H, c.D}, opts).to(c.dtype).requires_grad_(true);
  auto res = attention::cuda_causal_attention(qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2), /*want_distance=*/true);
  auto dout = torch::randn(res.out.sizes(), opts).to(c.dtype);
  res.out.backward(dout);
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the kernel");
  cuda_ok(cudaGetLastError(), "a CUDA error after the kernel");

  auto ref_qkv = qkv.detach().to(torch::kDouble).requires_grad_(true);
  auto ref = reference_attention64(ref_qkv.select(2, 0), ref_qkv.select(2, 1), ref_qkv.select(2, 2));
  ref.out.backward(dout.to(torch::kDouble));
  auto g = qkv.grad(), rg = ref_qkv.grad();
  Errors e;
  e.out = rel_err(res.out, ref.out);
  e.dq = rel_err(g.select(2, 0), rg.select(2, 0));
  e.dk = rel_err(g.select(2, 1), rg.select(2, 1));
  e.dv = rel_err(g.select(2, 2), rg.select(2, 2));
  e.distance = res.distance.defined() ? rel_err(res.distance, ref.distance) : NAN;
  return e;
}

const char* dtype_name(torch::ScalarType t) { return t == torch::kFloat ? "fp32" : t == torch::kHalf ? "fp16" : "bf16"; }

int run_cases(const std::vector<Case>& cases, const std::string& bench, const Report& report) {
  int failures = 0;
  uint64_t seed = 1;
  for (const auto& c : cases) {
    Errors e;
    std::string error;
    try {
      e = compare(c, seed++);
    } catch (const std::exception& ex) {
      error = ex.what();
      error = error.substr(0, error.find('\n'));
    }
    const double tol = tolerance(c.dtype);
    const bool ok = error.empty() && e.ok(tol);
    failures += ok ? 0 : 1;
    std::cout << fmt::format("  {:<4} d_h={:<3} T={:<4} B={} H={}  out {:.1e}  dq {:.1e}  dk {:.1e}  dv {:.1e}  "
                             "distance {:.1e}  (tolerance {:.0e}, distance {:.0e})  {}{}\n",
                             dtype_name(c.dtype), c.D, c.T, c.B, c.H, e.out, e.dq, e.dk, e.dv, e.distance, tol,
                             kDistanceTolerance, ok ? "ok" : "FAIL", error.empty() ? "" : "  ERROR: " + error);
    report.record(bench, {{"dtype", std::string(dtype_name(c.dtype))},
                          {"d_h", static_cast<long long>(c.D)},
                          {"T", static_cast<long long>(c.T)},
                          {"B", static_cast<long long>(c.B)},
                          {"H", static_cast<long long>(c.H)},
                          {"out_err", e.out},
                          {"dq_err", e.dq},
                          {"dk_err", e.dk},
                          {"dv_err", e.dv},
                          {"distance_err", e.distance},
                          {"tolerance", tol},
                          {"ok", ok},
                          {"error", error}});
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int run_smoke(const BenchOptions& opt, const Report& report) {
  const Case c = opt.small ? Case{1, 128, 2, 64, torch::kBFloat16} : Case{2, 512, 4, 64, torch::kBFloat16};
  std::cout << fmt::format("smoke: one causal attention case, forward (with distance) and backward, against float64\n");
  return run_cases({c}, "smoke", report);
}

int run_check(const BenchOptions& opt, const Report& report) {
  std::vector<Case> cases;
  const std::vector<int64_t> Ts = opt.quick ? std::vector<int64_t>{256} : std::vector<int64_t>{256, 1024, 4096};
  for (int64_t D : {32, 64, 96, 128, 192, 256})
    for (int64_t T : Ts) cases.push_back({T >= 4096 ? 1 : 2, T, 2, D, torch::kBFloat16});
  for (int64_t D : {64, 128, 256}) cases.push_back({1, 1024, 2, D, torch::kFloat});
  std::cout << fmt::format("check: the CUDA kernel against float64, {} cases (relative error of the norm)\n", cases.size());
  return run_cases(cases, "check", report);
}

}  // namespace prism::device_bench
