// prism-device-bench loss: the LM head and its cross-entropy at the 124M training
// shape (N = 16 x 1024 tokens, d 768, V 50257, tied weight), forward + backward
// under bf16 autocast, by both paths of lm_loss.h: plain (linear + cross_entropy,
// the default on CUDA) and chunked (the fused vocabulary-chunk loop, the default on
// the CPU). Prints each path's median time and peak memory and whether the
// measurement agrees with the default.
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "benches.h"
#include "prism/ops/lm_loss.h"
#include "timing.h"

namespace prism::device_bench {

int run_loss_bench(const BenchOptions& opt, const Report& report) {
  const int64_t N = opt.quick ? 4096 : 16 * 1024, d = 768, V = 50257;
  const int warmup = 2, iters = opt.quick ? 3 : 10;
  torch::manual_seed(0);
  auto dev = torch::dtype(torch::kFloat).device(torch::kCUDA);
  auto x = (torch::randn({N, d}, dev) * 0.5).requires_grad_(true);
  auto w = (torch::randn({V, d}, dev) * 0.02).requires_grad_(true);
  auto targets = torch::randint(V, {N}, torch::dtype(torch::kLong).device(torch::kCUDA));
  const LmLossPath fallback = lm_loss_path_for(torch::Device(torch::kCUDA));
  std::cout << fmt::format("loss: LM head + cross-entropy, N {} x d {} -> V {}, bf16 autocast, forward+backward; median "
                           "of {} after {} warm-ups; the default on CUDA is '{}'\n",
                           N, d, V, iters, warmup, lm_loss_path_name(fallback));
  auto step = [&](LmLossPath path) {
    x.mutable_grad() = torch::Tensor();
    w.mutable_grad() = torch::Tensor();
    torch::Tensor loss;
    {
      at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
      at::autocast::set_autocast_enabled(at::kCUDA, true);
      loss = lm_head_loss(x, w, targets, path);
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::autocast::clear_cache();
    }
    loss.backward();
    return loss;
  };
  int failures = 0;
  double loss_plain = NAN, loss_chunked = NAN;
  try {
    loss_plain = step(LmLossPath::Plain).item<double>();
    loss_chunked = step(LmLossPath::Chunked).item<double>();
  } catch (const std::exception& e) {
    std::cout << "  ERROR: " << e.what() << "\n";
    ++failures;
  }
  const double loss_diff = std::abs(loss_plain - loss_chunked) / std::abs(loss_chunked);
  if (!(loss_diff < 1e-2)) ++failures;  // bf16 matmuls on both paths: the same loss to bf16 rounding
  for (int run = 1; run <= opt.repeat; ++run) {
    double ms[2] = {NAN, NAN}, peak[2] = {NAN, NAN};
    std::string err[2];
    const LmLossPath paths[2] = {LmLossPath::Plain, LmLossPath::Chunked};
    for (int i = 0; i < 2; ++i) {
      try {
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        reset_peak_memory();
        ms[i] = median_ms([&] { step(paths[i]); }, warmup, iters);
        peak[i] = peak_memory_gb();
      } catch (const std::exception& e) {
        err[i] = e.what();
        err[i] = err[i].substr(0, err[i].find('\n'));
        ++failures;
      }
    }
    const LmLossPath faster = ms[0] <= ms[1] ? LmLossPath::Plain : LmLossPath::Chunked;
    for (int i = 0; i < 2; ++i) {
      std::cout << fmt::format("  {:<8} run {}  {:8.2f} ms  peak {:6.2f} GB  {:5.2f}x the other path{}{}\n",
                               lm_loss_path_name(paths[i]), run, ms[i], peak[i], ms[i] / ms[1 - i],
                               paths[i] == fallback ? "  (default)" : "", err[i].empty() ? "" : "  ERROR: " + err[i]);
      report.record("loss", {{"path", std::string(lm_loss_path_name(paths[i]))},
                             {"N", static_cast<long long>(N)},
                             {"d", static_cast<long long>(d)},
                             {"V", static_cast<long long>(V)},
                             {"run", static_cast<long long>(run)},
                             {"ms", ms[i]},
                             {"peak_gb", peak[i]},
                             {"over_other", ms[i] / ms[1 - i]},
                             {"loss_rel_diff", loss_diff},
                             {"default", paths[i] == fallback},
                             {"default_is_faster", faster == fallback},
                             {"error", err[i]}});
    }
    std::cout << fmt::format("  the default ('{}') is {} here (run {})\n", lm_loss_path_name(fallback),
                             faster == fallback ? "the faster path" : "NOT the faster path", run);
  }
  std::cout << fmt::format("  loss: plain {:.6f}, chunked {:.6f} (relative difference {:.1e})\n", loss_plain, loss_chunked,
                           loss_diff);
  return failures == 0 ? 0 : 1;
}

}  // namespace prism::device_bench
