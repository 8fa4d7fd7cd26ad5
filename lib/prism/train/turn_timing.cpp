#include "prism/train/turn_timing.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>

#include "prism/error.h"

namespace prism {

double bench_clock_seconds(BenchClock clock) {
  if (clock == BenchClock::ProcessCpu) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::vector<double>> time_in_turns(const std::vector<std::function<void()>>& arms, const TurnPlan& plan) {
  for (int i = 0; i < plan.warmup; ++i) {
    for (const auto& step : arms) step();
    if (plan.after_round) plan.after_round("warm-up", i + 1, plan.warmup);
  }
  if (plan.before_timed) plan.before_timed();
  std::vector<std::vector<double>> seconds(arms.size());
  for (int i = 0; i < plan.steps; ++i) {
    for (size_t a = 0; a < arms.size(); ++a) {
      const double t0 = bench_clock_seconds(plan.clock);
      arms[a]();
      seconds[a].push_back(bench_clock_seconds(plan.clock) - t0);
    }
    if (plan.after_round) plan.after_round("timed", i + 1, plan.steps);
  }
  return seconds;
}

PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty())
    throw Error(fmt::format("paired step times of {} and {} steps", a.size(), b.size()), "paired_ratio",
                "time both arms in the same turns (time_in_turns)");
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size(); ++i) ratios.push_back(a[i] / b[i]);
  PairedRatio r;
  r.median = median(ratios);
  r.ci = median_interval(ratios, 0.95, &r.coverage);
  return r;
}

}  // namespace prism
