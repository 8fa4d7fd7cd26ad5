#include "prism/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace prism {

double learning_rate(const TrainConfig& t, int64_t step) {
  if (step < t.warmup_steps) return t.lr * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps);
  if (t.decay == "constant") return t.lr;
  const double floor = t.lr * t.min_lr_ratio;
  const int64_t span = t.max_steps - t.warmup_steps;
  if (span <= 0) return t.lr;
  const double progress = std::clamp(static_cast<double>(step - t.warmup_steps) / static_cast<double>(span), 0.0, 1.0);
  const double shape = t.decay == "linear" ? 1.0 - progress : 0.5 * (1.0 + std::cos(M_PI * progress));
  return floor + shape * (t.lr - floor);
}

}  // namespace prism
