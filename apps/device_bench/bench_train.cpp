// prism-device-bench train: training throughput of the 124M shape (GPT-2 small,
// T 1024) with Prism's head schedule against the uniform baseline, in one process:
// forward, backward and an AdamW step per iteration, bf16 autocast, on random tokens.
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <iostream>

#include "benches.h"
#include "prism/attention/backend.h"
#include "prism/config/model_config.h"
#include "prism/model/gpt.h"
#include "timing.h"

namespace prism::device_bench {

namespace {

struct TrainResult {
  double ms_per_step = 0, tokens_per_s = 0, final_loss = 0;
  std::string backend;
};

TrainResult time_training(const ModelConfig& cfg, const HeadSchedule& schedule, const BenchOptions& opt) {
  torch::manual_seed(0);
  const torch::Device dev(torch::kCUDA);
  GPT model(cfg, schedule, attention::parse_backend(opt.backend));
  model->to(dev);
  model->train();
  torch::optim::AdamW adam(model->parameters(),
                           torch::optim::AdamWOptions(6e-4).betas({0.9, 0.95}).weight_decay(0.1));
  const int64_t B = opt.batch, T = cfg.block_size;
  auto tokens = torch::randint(cfg.vocab_size, {B, T + 1}, torch::dtype(torch::kLong).device(dev));
  auto x = tokens.narrow(1, 0, T), y = tokens.narrow(1, 1, T);

  TrainResult r;
  {  // What `auto` (or the named back end) resolves to for this model's q.
    auto probe = torch::empty({1, 1, 1, cfg.d_model / cfg.n_head}, torch::dtype(torch::kBFloat16).device(dev));
    attention::Options o;
    o.backend = model->attention_backend();
    r.backend = attention::backend_name(attention::resolve_backend(o, probe));
  }
  float loss_value = 0;
  auto step = [&] {
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    auto out = model->forward(x, y);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    adam.zero_grad();
    out.loss.backward();
    adam.step();
    // Autocast caches bf16 copies of the weights; they are stale after the step.
    at::autocast::clear_cache();
    loss_value = out.loss.detach().item<float>();  // one host sync per step, as a trainer logging loss
  };
  const int warmup = 3;
  r.ms_per_step = median_ms(step, warmup, opt.steps);
  r.tokens_per_s = static_cast<double>(B * T) / (r.ms_per_step * 1e-3);
  r.final_loss = loss_value;
  return r;
}

}  // namespace

int run_train_bench(const BenchOptions& opt, const Report& report) {
  const ModelConfig cfg = model_preset("gpt2-124m");
  const std::vector<std::pair<std::string, HeadSchedule>> runs = {
      {"uniform", HeadSchedule::uniform(cfg.n_layer, cfg.n_head)},
      {"prism", HeadSchedule::parse("3x3,6x3,12x6")}};
  std::cout << fmt::format(
      "train: {} (L {}, d {}, T {}), micro-batch {}, bf16 autocast, AdamW; median step of {} after 3 warm-ups; "
      "attention back end '{}'\n",
      cfg.preset, cfg.n_layer, cfg.d_model, cfg.block_size, opt.batch, opt.steps, opt.backend);
  double uniform_tps = 0;
  int failures = 0;
  for (const auto& [name, schedule] : runs) {
    TrainResult r;
    std::string error;
    try {
      r = time_training(cfg, schedule, opt);
    } catch (const std::exception& e) {
      error = e.what();
      ++failures;
    }
    if (name == "uniform") uniform_tps = r.tokens_per_s;
    const double ratio = uniform_tps > 0 ? r.tokens_per_s / uniform_tps : 0.0;
    std::cout << fmt::format("  {:<8} heads {:<14} attention={:<9} {:8.1f} ms/step  {:9.0f} tokens/s  {:5.3f}x uniform  "
                             "loss {:.3f}{}\n",
                             name, schedule.compact(), r.backend, r.ms_per_step, r.tokens_per_s, ratio, r.final_loss,
                             error.empty() ? "" : "  ERROR: " + error);
    report.record("train", {{"model", cfg.preset},
                            {"schedule", name},
                            {"heads", schedule.compact()},
                            {"attention_backend", r.backend},
                            {"requested_backend", opt.backend},
                            {"batch", static_cast<long long>(opt.batch)},
                            {"T", static_cast<long long>(cfg.block_size)},
                            {"ms_per_step", r.ms_per_step},
                            {"tokens_per_s", r.tokens_per_s},
                            {"throughput_vs_uniform", ratio},
                            {"final_loss", static_cast<double>(r.final_loss)},
                            {"error", error}});
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace prism::device_bench
