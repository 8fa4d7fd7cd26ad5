// prism-device-bench train: training throughput of the 124M shape (GPT-2 small,
// T 1024) in one process: forward, backward and an AdamW step per iteration on
// random tokens, Prism's head schedule against the uniform baseline. Options pick
// the dtype (bf16 autocast, or fp32 with TF32 matmuls on and/or off), micro-batches
// (peak memory for each: what the study recipe's micro-batch rests on) and the
// attention back end. MFU counts nanoGPT's 6 N + 12 L d T FLOPs per token against
// the bf16 matmul peak measured first (recorded as {"bench": "peak"}).
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <map>

#include "benches.h"
#include "prism/config/attention_backend.h"
#include "prism/config/model_config.h"
#include "prism/model/gpt.h"
#include "prism/ops/lm_loss.h"
#include "timing.h"

namespace prism::device_bench {

namespace {

struct RunSpec {
  std::string schedule_name;
  HeadSchedule schedule;
  int batch;
  bool bf16, tf32;
};

struct TrainResult {
  double ms_per_step = NAN, tokens_per_s = NAN, final_loss = NAN, peak_gb = NAN, flops_per_token = NAN;
  std::string backend;
};

// Median of ten n x n x n bf16 matmuls on random data (zeros run faster and would flatter MFU).
double bf16_matmul_peak(int64_t n) {
  auto a = torch::randn({n, n}, torch::dtype(torch::kBFloat16).device(torch::kCUDA));
  auto b = torch::randn({n, n}, torch::dtype(torch::kBFloat16).device(torch::kCUDA));
  const double ms = median_ms([&] { torch::mm(a, b); }, 3, 10);
  return 2.0 * n * n * n / (ms * 1e-3);
}

TrainResult time_training(const ModelConfig& cfg, const RunSpec& run, const BenchOptions& opt) {
  torch::manual_seed(0);
  const torch::Device dev(torch::kCUDA);
  at::globalContext().setAllowTF32CuBLAS(run.tf32);
  GPT model(cfg, run.schedule, attention::parse_backend(opt.backend));
  model->to(dev);
  model->train();
  torch::optim::AdamW adam(model->parameters(),
                           torch::optim::AdamWOptions(6e-4).betas({0.9, 0.95}).weight_decay(0.1));
  const int64_t B = run.batch, T = cfg.block_size;
  auto tokens = torch::randint(cfg.vocab_size, {B, T + 1}, torch::dtype(torch::kLong).device(dev));
  auto x = tokens.narrow(1, 0, T), y = tokens.narrow(1, 1, T);

  TrainResult r;
  {  // What `auto` (or the named back end) resolves to for this model's q.
    auto probe = torch::empty({1, 1, 1, cfg.d_model / cfg.n_head}, torch::dtype(torch::kBFloat16).device(dev));
    attention::Options o;
    o.backend = model->attention_backend();
    r.backend = attention::backend_name(attention::resolve_backend(o, probe));
  }
  const double n_params = static_cast<double>(model->num_params(/*include_position_table=*/false));
  r.flops_per_token = 6.0 * n_params + 12.0 * cfg.n_layer * cfg.d_model * T;
  float loss_value = 0;
  auto step = [&] {
    if (run.bf16) {
      at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
      at::autocast::set_autocast_enabled(at::kCUDA, true);
    }
    auto out = model->forward(x, y);
    if (run.bf16) at::autocast::set_autocast_enabled(at::kCUDA, false);
    adam.zero_grad();
    out.loss.backward();
    adam.step();
    if (run.bf16) at::autocast::clear_cache();  // bf16 copies of the weights are stale after the step
    loss_value = out.loss.detach().item<float>();  // one host sync per step, as a trainer logging loss
  };
  step();  // the optimizer's moments exist from here: the peak below is a steady step's
  reset_peak_memory();
  r.ms_per_step = median_ms(step, 2, opt.steps);
  r.peak_gb = peak_memory_gb();
  r.tokens_per_s = static_cast<double>(B * T) / (r.ms_per_step * 1e-3);
  r.final_loss = loss_value;
  return r;
}

}  // namespace

int run_train_bench(const BenchOptions& opt, const Report& report) {
  const ModelConfig cfg = model_preset("gpt2-124m");
  int failures = 0;
  double peak = NAN;
  try {
    peak = bf16_matmul_peak(8192);
    report.record("peak", {{"dtype", std::string("bf16")}, {"tflops", peak / 1e12}, {"shape", std::string("8192^3")}});
  } catch (const std::exception& e) {
    std::cout << "  peak: ERROR: " << e.what() << "\n";
    ++failures;
  }
  std::vector<RunSpec> runs;
  const bool bf16 = opt.dtype == "bf16";
  for (const auto& tf32 : bf16 ? std::vector<std::string>{"on"} : opt.tf32)
    for (int batch : opt.batches)
      for (const auto& name : opt.schedules)
        runs.push_back({name,
                        name == "uniform" ? HeadSchedule::uniform(cfg.n_layer, cfg.n_head) : HeadSchedule::parse("3x3,6x3,12x6"),
                        batch, bf16, tf32 == "on"});
  std::cout << fmt::format(
      "train: {} (L {}, d {}, T {}), {}, AdamW; median step of {} after 3 (the first untimed); attention '{}', LM-head "
      "loss '{}'; bf16 matmul peak measured here {:.0f} TFLOP/s\n",
      cfg.preset, cfg.n_layer, cfg.d_model, cfg.block_size, bf16 ? "bf16 autocast" : "fp32", opt.steps, opt.backend,
      lm_loss_path_name(lm_loss_path_for(torch::Device(torch::kCUDA))), peak / 1e12);
  std::map<std::string, double> uniform_tps;  // by batch and TF32: the baseline of the same conditions
  for (const auto& run : runs) {
    TrainResult r;
    std::string error;
    try {
      r = time_training(cfg, run, opt);
    } catch (const std::exception& e) {
      error = e.what();
      error = error.substr(0, error.find('\n'));
      ++failures;
    }
    const std::string key = fmt::format("{}/{}", run.batch, run.tf32);
    if (run.schedule_name == "uniform") uniform_tps[key] = r.tokens_per_s;
    const double ratio = uniform_tps.count(key) ? r.tokens_per_s / uniform_tps[key] : NAN;
    const double mfu = run.bf16 ? 100.0 * r.tokens_per_s * r.flops_per_token / peak : NAN;
    std::cout << fmt::format("  {:<8} heads {:<14} {} tf32 {:<3} B={:<3} attention={:<9} {:8.1f} ms/step  {:9.0f} tokens/s  "
                             "{:5.3f}x uniform  MFU {:5.1f}%  peak {:6.1f} GB  loss {:.3f}{}\n",
                             run.schedule_name, run.schedule.compact(), run.bf16 ? "bf16" : "fp32", run.tf32 ? "on" : "off",
                             run.batch, r.backend, r.ms_per_step, r.tokens_per_s, ratio, mfu, r.peak_gb, r.final_loss,
                             error.empty() ? "" : "  ERROR: " + error);
    report.record("train", {{"model", cfg.preset},
                            {"schedule", run.schedule_name},
                            {"heads", run.schedule.compact()},
                            {"dtype", std::string(run.bf16 ? "bf16" : "fp32")},
                            {"tf32", std::string(run.tf32 ? "on" : "off")},
                            {"attention_backend", r.backend},
                            {"requested_backend", opt.backend},
                            {"loss_path", std::string(lm_loss_path_name(lm_loss_path_for(torch::Device(torch::kCUDA))))},
                            {"batch", static_cast<long long>(run.batch)},
                            {"T", static_cast<long long>(cfg.block_size)},
                            {"ms_per_step", r.ms_per_step},
                            {"tokens_per_s", r.tokens_per_s},
                            {"throughput_vs_uniform", ratio},
                            {"mfu_pct", mfu},
                            {"peak_gb", r.peak_gb},
                            {"final_loss", r.final_loss},
                            {"error", error}});
    c10::cuda::CUDACachingAllocator::emptyCache();  // the next batch size starts from an empty pool
  }
  at::globalContext().setAllowTF32CuBLAS(true);
  return failures == 0 ? 0 : 1;
}

}  // namespace prism::device_bench
