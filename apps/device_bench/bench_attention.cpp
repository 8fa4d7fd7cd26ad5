// prism-device-bench attention: Prism's CUDA kernel against LibTorch's SDPA flash
// back end (at::_scaled_dot_product_flash_attention), both reading the same strided
// q/k/v views of one fused (B, T, 3, H, D) qkv tensor, causal, bf16. Modes:
//   fwd       the forward alone (no autograd graph)
//   bwd       the backward alone (its forward runs outside the timed region)
//   fwd+bwd   both
// Prism is timed with its distance telemetry off and on (fwd, fwd+bwd); SDPA has none.
// Every shape is timed `--repeat` times (the device check: twice) so the spread
// between runs shows the noise; a shape that fails is reported and the others run.
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

struct Shape {
  int64_t d_h, T, B, H;
};

torch::Tensor sdpa_flash(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
  // (B, T, H, D) views -> the (B, H, T, D) views SDPA takes; no copies.
  return std::get<0>(at::_scaled_dot_product_flash_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                             v.transpose(1, 2), 0.0, /*is_causal=*/true,
                                                             /*return_debug_mask=*/false, scale))
      .transpose(1, 2);
}

struct Timings {
  double prism = NAN, prism_distance = NAN, flash = NAN;
};

// One mode of one shape: every implementation on the same leaf tensor and output gradient.
Timings time_mode(const Shape& s, const std::string& mode, const torch::Tensor& qkv, int warmup, int iters) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d_h));
  const bool needs_grad = mode != "fwd";
  auto leaf = qkv.detach().requires_grad_(needs_grad);
  auto q = leaf.select(2, 0), k = leaf.select(2, 1), v = leaf.select(2, 2);
  auto dout = torch::randn({s.B, s.T, s.H, s.d_h}, qkv.options());
  auto time_impl = [&](auto&& forward) {
    if (mode == "fwd")
      return median_ms(
          [&] {
            torch::NoGradGuard ng;
            forward(q, k, v);
          },
          warmup, iters);
    if (mode == "fwd+bwd")
      return median_ms(
          [&] {
            leaf.mutable_grad() = torch::Tensor();
            forward(q, k, v).backward(dout);
          },
          warmup, iters);
    torch::Tensor out;  // bwd: the forward outside the timed region
    return median_ms_split(
        [&] {
          leaf.mutable_grad() = torch::Tensor();
          out = forward(q, k, v);
        },
        [&] { out.backward(dout); }, warmup, iters);
  };
  Timings t;
  t.prism = time_impl([](auto& a, auto& b, auto& c) { return attention::cuda_causal_attention(a, b, c, false).out; });
  if (mode != "bwd")  // the telemetry is a forward output; the backward is the same kernel either way
    t.prism_distance =
        time_impl([](auto& a, auto& b, auto& c) { return attention::cuda_causal_attention(a, b, c, true).out; });
  t.flash = time_impl([&](auto& a, auto& b, auto& c) { return sdpa_flash(a, b, c, scale); });
  return t;
}

}  // namespace

int run_attention_bench(const BenchOptions& opt, const Report& report) {
  const int64_t tokens = opt.quick ? 8192 : 32768;  // B * T per shape
  std::vector<Shape> shapes;
  for (int64_t d_h : {64, 128, 256})
    for (int64_t T : {1024, 4096}) shapes.push_back({d_h, T, std::max<int64_t>(1, tokens / T), 768 / d_h});
  const int warmup = 3, iters = opt.quick ? 5 : 15;
  int failures = 0;
  std::cout << fmt::format(
      "attention: causal, bf16, q/k/v strided views of (B, T, 3, H, D); median of {} runs after {} warm-ups, each "
      "shape timed {} time(s); FLOPs count the causal half (fwd 2*B*H*T^2*D, bwd 2.5x that)\n",
      iters, warmup, opt.repeat);
  for (const auto& s : shapes) {
    torch::manual_seed(0);
    auto qkv = torch::randn({s.B, s.T, 3, s.H, s.d_h}, torch::dtype(torch::kBFloat16).device(torch::kCUDA));
    const double fwd_flops = 2.0 * s.B * s.H * static_cast<double>(s.T) * s.T * s.d_h;
    // The pair must compute the same function before their times mean anything.
    double diff = NAN;
    std::string error;
    try {
      torch::NoGradGuard ng;
      auto q = qkv.select(2, 0), k = qkv.select(2, 1), v = qkv.select(2, 2);
      diff = rel_err(attention::cuda_causal_attention(q, k, v, false).out,
                     sdpa_flash(q, k, v, 1.0 / std::sqrt(static_cast<double>(s.d_h))));
    } catch (const std::exception& e) {
      error = e.what();
    }
    const bool agree = diff < 2e-2;
    for (int run = 1; run <= opt.repeat; ++run) {
      for (const std::string mode : {"fwd", "bwd", "fwd+bwd"}) {
        Timings t;
        std::string err = error;
        if (err.empty()) {
          try {
            t = time_mode(s, mode, qkv, warmup, iters);
          } catch (const std::exception& e) {
            err = e.what();
          }
        }
        err = err.substr(0, err.find('\n'));
        if (!err.empty() || !agree) ++failures;
        const double flops = mode == "fwd" ? fwd_flops : mode == "bwd" ? 2.5 * fwd_flops : 3.5 * fwd_flops;
        const double tf = flops / (t.prism * 1e-3) / 1e12, tf_flash = flops / (t.flash * 1e-3) / 1e12;
        std::cout << fmt::format(
            "  d_h={:<3} T={:<4} B={:<2} H={:<2} {:<7} run {}  prism {:8.3f} ms ({:6.1f} TFLOP/s)  +distance {:8.3f} ms  "
            "sdpa-flash {:8.3f} ms ({:6.1f} TFLOP/s)  prism/flash {:5.2f}x  out rel diff {:.1e}{}{}\n",
            s.d_h, s.T, s.B, s.H, mode, run, t.prism, tf, t.prism_distance, t.flash, tf_flash, t.prism / t.flash, diff,
            agree ? "" : "  DISAGREE", err.empty() ? "" : "  ERROR: " + err);
        report.record("attention", {{"d_h", static_cast<long long>(s.d_h)},
                                    {"T", static_cast<long long>(s.T)},
                                    {"B", static_cast<long long>(s.B)},
                                    {"H", static_cast<long long>(s.H)},
                                    {"dtype", std::string("bf16")},
                                    {"mode", mode},
                                    {"run", static_cast<long long>(run)},
                                    {"prism_ms", t.prism},
                                    {"prism_distance_ms", t.prism_distance},
                                    {"sdpa_flash_ms", t.flash},
                                    {"prism_over_flash", t.prism / t.flash},
                                    {"distance_overhead", t.prism_distance / t.prism - 1.0},
                                    {"prism_tflops", tf},
                                    {"sdpa_flash_tflops", tf_flash},
                                    {"out_rel_diff", diff},
                                    {"error", err}});
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace prism::device_bench
