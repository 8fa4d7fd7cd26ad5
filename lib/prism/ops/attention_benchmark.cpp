#include "prism/ops/attention_benchmark.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "prism/ops/allocation_tracker.h"
#include "prism/ops/attention.h"
#include "prism/ops/attention_fused.h"
#include "prism/stats/stats.h"

namespace prism::attention {

namespace {

double now_ms(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What one back end produced in the warm-up round, for the correctness check.
struct Produced {
  torch::Tensor out, dq, dk, dv, distance;
};

Output run_backend(const std::string& name, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const std::string& code_path) {
  if (name == "fused" || name == "fused+distance") {
    FusedOptions f;
    f.want_distance = name == "fused+distance";
    f.code_path = code_path;
    return fused_attention(q, k, v, f);
  }
  Options o;
  o.backend = name == "reference" ? Backend::Reference : Backend::Sdpa;
  return causal_attention(q, k, v, o);
}

double rel_error(const torch::Tensor& a, const torch::Tensor& e) {
  auto a64 = a.to(torch::kDouble), e64 = e.to(torch::kDouble);
  const double den = e64.norm().item<double>();
  return (a64 - e64).norm().item<double>() / std::max(den, 1e-30);
}

void check(BackendRun& run, const Produced& got, const Produced& want, const std::string& against,
           torch::ScalarType dtype) {
  run.checked_against = against;
  const std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>> parts[] = {
      {"out", {got.out, want.out}},
      {"dq", {got.dq, want.dq}},
      {"dk", {got.dk, want.dk}},
      {"dv", {got.dv, want.dv}},
      {"distance", {got.distance, want.distance}}};
  for (const auto& [name, pair] : parts) {
    if (!pair.first.defined() || !pair.second.defined()) continue;
    const double e = rel_error(pair.first, pair.second);
    if (!(e <= run.error)) {  // NaN counts as worst
      run.error = e;
      run.worst = name;
    }
  }
  run.correct = run.error <= bench_check_tolerance(dtype);
}

}  // namespace

const std::vector<std::string>& bench_backend_names() {
  static const std::vector<std::string> names = {"reference", "sdpa", "fused", "fused+distance"};
  return names;
}

double bench_check_tolerance(torch::ScalarType dtype) { return dtype == torch::kBFloat16 ? 2e-2 : 1e-4; }

double reference_estimate_gib(const BenchCase& c) {
  // Measured: 2.3 GiB at T 4096 with 12 heads, fp32 and bf16 alike; plus margin.
  return 3.5 * static_cast<double>(c.B * c.H) * static_cast<double>(c.T) * static_cast<double>(c.T) * 4.0 /
         (1024.0 * 1024.0 * 1024.0);
}

double paired_ratio(const BackendRun& a, const BackendRun& base) {
  std::vector<double> r;
  for (size_t i = 0; i < a.rounds.size() && i < base.rounds.size(); ++i) r.push_back(a.rounds[i] / base.rounds[i]);
  return median(r);
}

std::map<std::string, BackendRun> bench_attention_case(const BenchCase& c, const BenchSettings& s) {
  std::map<std::string, BackendRun> res;
  std::vector<std::string> active;
  for (const auto& b : s.backends) {
    if (b == "reference" && reference_estimate_gib(c) > s.reference_limit_gib) {
      res[b].skipped = fmt::format("needs ~{:.1f} GiB of T x T buffers (> --reference-limit-gib {})",
                                   reference_estimate_gib(c), s.reference_limit_gib);
      continue;
    }
    active.push_back(b);
  }
  torch::manual_seed(0);
  auto qkv = torch::randn({c.B, c.T, 3, c.H, c.D}).to(c.dtype);
  auto dout = torch::randn({c.B, c.T, c.H, c.D}).to(c.dtype);
  // Leaves that keep the strided layout of the fused projection.
  auto q = qkv.select(2, 0).detach().requires_grad_();
  auto k = qkv.select(2, 1).detach().requires_grad_();
  auto v = qkv.select(2, 2).detach().requires_grad_();
  std::map<std::string, Produced> produced;
  for (int r = 0; r <= s.repeat; ++r) {  // round 0 warms up, measures memory and keeps the results
    for (const auto& b : active) {
      for (auto* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
      PeakAllocationScope scope;
      const double t0 = now_ms(s.cpu_clock);
      Output out = run_backend(b, q, k, v, s.code_path);
      out.out.backward(dout);
      const double ms = now_ms(s.cpu_clock) - t0;
      if (r == 0) {
        res[b].peak_mib = static_cast<double>(scope.extra_bytes()) / (1024.0 * 1024.0);
        if (s.check) {
          produced[b] = {out.out.detach(), q.grad(), k.grad(), v.grad(), out.distance};
          // The reference's distance, outside the timing: the check compares the fused kernel's with it.
          if (b == "reference") {
            torch::NoGradGuard no_grad;
            produced[b].distance = reference_attention(q, k, v, 0.0, true).distance;
          }
        }
      } else {
        res[b].rounds.push_back(ms);
      }
    }
  }
  for (const auto& b : active) {
    res[b].ms = median(res[b].rounds);
    res[b].ran = true;
  }
  // Against the reference where it ran, else against SDPA (outputs and gradients only).
  const std::string base = produced.count("reference") ? "reference" : produced.count("sdpa") ? "sdpa" : "";
  if (!base.empty())
    for (auto& [name, got] : produced)
      if (name != base) check(res[name], got, produced[base], base, c.dtype);
  return res;
}

}  // namespace prism::attention
