// prism-device-bench attention: Prism's CUDA kernel against LibTorch's SDPA
// flash back end (at::_scaled_dot_product_flash_attention), both reading the same
// strided q/k/v views of one fused (B, T, 3, H, D) qkv tensor, causal, bf16.
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "benches.h"
#include "prism/attention/cuda/cuda_attention.h"
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

torch::Tensor prism_cuda(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return attention::cuda_causal_attention(q, k, v, /*want_distance=*/false).out;
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& ref) {
  auto af = a.to(torch::kFloat), rf = ref.to(torch::kFloat);
  return ((af - rf).norm() / rf.norm()).item<double>();
}

}  // namespace

int run_attention_bench(const BenchOptions& opt, const Report& report) {
  const int64_t tokens = opt.quick ? 8192 : 32768;  // B * T per shape
  std::vector<Shape> shapes;
  for (int64_t d_h : {64, 128, 256})
    for (int64_t T : {1024, 4096}) shapes.push_back({d_h, T, std::max<int64_t>(1, tokens / T), 768 / d_h});
  const int warmup = 3, iters = opt.quick ? 5 : 20;
  int failures = 0;
  std::cout << fmt::format("attention: causal, bf16, q/k/v strided views of (B, T, 3, H, D); median of {} runs after {} "
                           "warm-ups; FLOPs count the causal half (fwd 2*B*H*T^2*D, fwd+bwd 3.5x that)\n",
                           iters, warmup);
  for (const auto& s : shapes) {
    torch::manual_seed(0);
    auto opts = torch::dtype(torch::kBFloat16).device(torch::kCUDA);
    auto qkv = torch::randn({s.B, s.T, 3, s.H, s.d_h}, opts);
    auto q = qkv.select(2, 0), k = qkv.select(2, 1), v = qkv.select(2, 2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.d_h));
    const double fwd_flops = 2.0 * s.B * s.H * static_cast<double>(s.T) * s.T * s.d_h;
    // Correctness of the pair first: the two must compute the same function.
    double diff = NAN;
    {
      torch::NoGradGuard ng;
      diff = rel_diff(prism_cuda(q, k, v), sdpa_flash(q, k, v, scale));
    }
    const bool agree = diff < 2e-2;
    if (!agree) ++failures;
    for (const std::string mode : {"fwd", "fwd+bwd"}) {
      const bool bwd = mode == "fwd+bwd";
      auto leaf = qkv.detach().requires_grad_(bwd);
      auto ql = leaf.select(2, 0), kl = leaf.select(2, 1), vl = leaf.select(2, 2);
      auto dout = torch::randn({s.B, s.T, s.H, s.d_h}, opts);
      auto time_one = [&](auto&& impl) {
        return median_ms(
            [&] {
              if (bwd) {
                leaf.mutable_grad() = torch::Tensor();
                impl(ql, kl, vl).backward(dout);
              } else {
                torch::NoGradGuard ng;
                impl(ql, kl, vl);
              }
            },
            warmup, iters);
      };
      double ms_prism = NAN, ms_flash = NAN;
      std::string error;
      try {
        ms_prism = time_one([&](auto& a, auto& b, auto& c) { return prism_cuda(a, b, c); });
        ms_flash = time_one([&](auto& a, auto& b, auto& c) { return sdpa_flash(a, b, c, scale); });
      } catch (const std::exception& e) {
        error = e.what();
        ++failures;
      }
      const double flops = bwd ? 3.5 * fwd_flops : fwd_flops;
      const double tf_prism = flops / (ms_prism * 1e-3) / 1e12, tf_flash = flops / (ms_flash * 1e-3) / 1e12;
      std::cout << fmt::format(
          "  d_h={:<3} T={:<4} B={:<2} H={:<2} {:<7}  prism {:8.3f} ms ({:6.1f} TFLOP/s)  sdpa-flash {:8.3f} ms "
          "({:6.1f} TFLOP/s)  prism/flash time {:5.2f}x  out rel diff {:.1e}{}{}\n",
          s.d_h, s.T, s.B, s.H, mode, ms_prism, tf_prism, ms_flash, tf_flash, ms_prism / ms_flash, diff,
          agree ? "" : "  DISAGREE", error.empty() ? "" : "  ERROR: " + error);
      report.record("attention", {{"d_h", static_cast<long long>(s.d_h)},
                                  {"T", static_cast<long long>(s.T)},
                                  {"B", static_cast<long long>(s.B)},
                                  {"H", static_cast<long long>(s.H)},
                                  {"dtype", std::string("bf16")},
                                  {"mode", mode},
                                  {"prism_ms", ms_prism},
                                  {"sdpa_flash_ms", ms_flash},
                                  {"prism_over_flash_time", ms_prism / ms_flash},
                                  {"prism_tflops", tf_prism},
                                  {"sdpa_flash_tflops", tf_flash},
                                  {"out_rel_diff", diff},
                                  {"error", error}});
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace prism::device_bench
