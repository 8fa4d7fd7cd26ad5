#pragma once
// Linear warmup, then cosine (or linear) decay to a floor, as in the GPT-2
// reproductions of nanoGPT / llm.c.
#include <cstdint>

#include "prism/config/train_config.h"

namespace prism {

// Learning rate for optimizer step `step` (0-based).
double learning_rate(const TrainConfig& t, int64_t step);

}  // namespace prism
