#include "prism/train/step_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "prism/config/attention_backend.h"
#include "prism/machine_cache.h"
#include "prism/model/gpt.h"
#include "prism/train/execution.h"
#include "prism/train/optimizer.h"

namespace prism {

BatchSource random_token_batches(int64_t vocab_size, int64_t B, int64_t T, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return [=] {
    return std::make_pair(torch::randint(0, vocab_size, {B, T}, gen, torch::kLong),
                          torch::randint(0, vocab_size, {B, T}, gen, torch::kLong));
  };
}

StepTiming time_training_steps(const Config& c, int steps, double budget_s) {
  const TrainConfig& t = c.train;
  const Execution exec = resolve_execution(t);
  const int64_t T = t.seq_len > 0 ? t.seq_len : c.model.block_size;
  const int64_t micro = t.batch_size * T;
  const int64_t accum = t.tokens_per_step > 0 && micro > 0 ? std::max<int64_t>(1, t.tokens_per_step / micro) : 1;
  torch::manual_seed(t.seed);
  GPT model(c.model, c.schedule, attention::parse_backend(c.attention.backend));
  model->to(exec.device);
  auto opt = make_adamw(*model, t);
  const BatchSource random = random_token_batches(c.model.vocab_size, t.batch_size, T, t.seed);
  const BatchSource next = [&] {
    auto [x, y] = random();
    return std::make_pair(x.to(exec.device), y.to(exec.device));
  };
  auto one_step = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    optimizer_step(model, *opt, exec, next, accum, t.grad_clip);
    if (exec.device.is_cuda()) torch::cuda::synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  StepTiming r;
  r.execution = exec.describe();
  r.dtype_reason = exec.dtype_reason;
  r.seconds = one_step();  // warm-up: first-touch pages, kernel selection
  if (r.seconds > budget_s) return r;
  for (int i = 0; i < steps; ++i) {
    const double s = one_step();
    r.seconds = i == 0 ? s : std::min(r.seconds, s);
    r.timed += 1;
  }
  return r;
}

TrainingArm::TrainingArm(const ModelConfig& mc, const HeadSchedule& s, const std::string& backend, bool bf16, int64_t B,
                         int64_t T)
    : model_(nullptr) {
  TrainConfig tc;
  tc.device = "cpu";
  tc.threads = torch::get_num_threads();
  tc.dtype = bf16 ? "bf16" : "fp32";
  exec_ = resolve_execution(tc);
  torch::manual_seed(0);
  model_ = GPT(mc, s, attention::parse_backend(backend));
  opt_ = make_adamw(*model_, tc);
  next_ = random_token_batches(mc.vocab_size, B, T, 1);
}

double TrainingArm::step() { return optimizer_step(model_, *opt_, exec_, next_, 1, 1.0).loss; }

std::string bench_machine() {
  return fmt::format("{}, {} intra-op threads, LibTorch {}{}", cpu_model_name(), torch::get_num_threads(), TORCH_VERSION,
                     torch::cuda::is_available() ? fmt::format(", CUDA device: {}", torch::cuda::device_count()) : " (CPU)");
}

}  // namespace prism
