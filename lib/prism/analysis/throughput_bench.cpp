#include "prism/analysis/throughput_bench.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <numeric>
#include <vector>

#include "prism/config/model_config.h"
#include "prism/error.h"
#include "prism/schedule/rules.h"
#include "prism/launch/process.h"
#include "prism/train/step_probe.h"
#include "prism/train/turn_timing.h"

namespace prism {
namespace {

// Quoted for the shell only where it needs it, so the command reads as typed.
std::string arg(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                      "0123456789_./,:+=-") == std::string::npos;
  return plain ? s : shell_quote(s);
}

// LibTorch's intra-op threads set for the bench, restored after it.
class ThreadsFor {
 public:
  explicit ThreadsFor(int n) : before_(torch::get_num_threads()) {
    if (n > 0) torch::set_num_threads(n);
  }
  ~ThreadsFor() { torch::set_num_threads(before_); }
  ThreadsFor(const ThreadsFor&) = delete;
  ThreadsFor& operator=(const ThreadsFor&) = delete;

 private:
  int before_;
};

}  // namespace

std::string bench_command(const BenchRequest& r, const std::string& prism) {
  return fmt::format(
      "{} bench train --model {} --vocab {} --heads {} --batch {} --seq {} --dtype {} --threads {} --steps {} "
      "--warmup {} --clock cpu --compare none",
      arg(prism), arg(r.model), r.vocab, arg(r.heads), r.batch, r.seq, arg(r.dtype), r.threads,
      r.steps, r.warmup);
}

BenchResult run_bench_train(const BenchRequest& r) {
  if (r.dtype != "fp32" && r.dtype != "bf16")
    throw Error("unknown dtype '" + r.dtype + "'", "the throughput bench", "use fp32 or bf16");
  if (r.batch <= 0 || r.seq <= 0 || r.steps <= 0 || r.warmup < 0)
    throw Error(fmt::format("batch {} x seq {}, {} steps after {} warm-up", r.batch, r.seq, r.steps, r.warmup),
                "the throughput bench", "give a positive batch, sequence length and step count");
  ModelConfig mc = model_preset(r.model);
  if (r.vocab > 0) mc.vocab_size = r.vocab;
  const HeadSchedule uniform = HeadSchedule::uniform(mc.n_layer, mc.n_head), schedule = HeadSchedule::parse(r.heads);
  require_valid_schedule(schedule, mc.n_layer, mc.d_model, mc.n_head);
  const ThreadsFor threads(r.threads);
  const bool bf16 = r.dtype == "bf16";
  TrainingArm u(mc, uniform, "auto", bf16, r.batch, r.seq), p(mc, schedule, "auto", bf16, r.batch, r.seq);
  TurnPlan plan;
  plan.warmup = r.warmup;
  plan.steps = r.steps;
  plan.clock = BenchClock::ProcessCpu;  // steadier on a shared machine than the wall clock
  const auto seconds = time_in_turns({[&] { u.step(); }, [&] { p.step(); }}, plan);
  const double tokens = static_cast<double>(r.batch * r.seq * r.steps);
  BenchResult b;
  b.uniform_tokens_per_s = tokens / std::accumulate(seconds[0].begin(), seconds[0].end(), 0.0);
  b.tokens_per_s = tokens / std::accumulate(seconds[1].begin(), seconds[1].end(), 0.0);
  const PairedRatio ratio = paired_ratio(seconds[0], seconds[1]);  // uniform's step time over the schedule's
  b.ratio = ratio.median;
  b.ratio_lo = ratio.ci.lo;
  b.ratio_hi = ratio.ci.hi;
  b.machine = bench_machine();
  b.command = bench_command(r, "prism");  // the same measurement, as a reader would type it
  return b;
}

}  // namespace prism
