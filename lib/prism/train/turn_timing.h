#pragma once
// The one timing core of the benchmarks (`prism bench train`, `prism bench search`) and of the
// study report's throughput: arms that take turns, one step of each in order with warm-up
// rounds first, so load from other processes falls on every arm alike and the i-th steps of
// two arms pair up; and the median over steps of their paired time ratios, with its
// distribution-free interval.
#include <functional>
#include <vector>

#include "prism/stats/stats.h"

namespace prism {

// Wall: steady wall-clock time. ProcessCpu: this process's CPU time, steadier on a shared machine.
enum class BenchClock { Wall, ProcessCpu };
double bench_clock_seconds(BenchClock clock);

struct TurnPlan {
  int warmup = 3, steps = 20;
  BenchClock clock = BenchClock::Wall;
  // Called after each round (every arm stepped once), outside the timing: phase "warm-up" or "timed",
  // rounds done and in all. For progress lines and work that must not fall on one arm's time.
  std::function<void(const char* phase, int done, int total)> after_round;
  std::function<void()> before_timed;  // once, after the warm-up (e.g. to start a trace of the timed steps)
};

// Runs plan.warmup untimed rounds, then plan.steps timed ones; returns seconds[arm][step].
std::vector<std::vector<double>> time_in_turns(const std::vector<std::function<void()>>& arms, const TurnPlan& plan);

// a against b, step by step: the median over i of a[i] / b[i] (with step times, b's speed over a's
// when their steps do the same work), its 95% order-statistic interval (NaN below 6 steps) and
// that interval's exact coverage. Throws prism::Error when the two differ in length or are empty.
struct PairedRatio {
  double median = 0;
  Interval ci;
  double coverage = 0;
};
PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace prism
