#pragma once
// The two measurements of prism-device-bench and their shared options.
#include <string>

#include "report.h"

namespace prism::device_bench {

struct BenchOptions {
  bool quick = false;         // fewer shapes' tokens and runs: a smoke test
  std::string backend = "auto";  // attention back end of the training run
  int steps = 10;             // timed training steps (after warm-up)
  int batch = 16;             // training micro-batch
};

// Prism's CUDA kernel vs SDPA flash, d_h 64/128/256, T 1024/4096, bf16. Returns 0 if all ran and agreed.
int run_attention_bench(const BenchOptions& opt, const Report& report);

// 124M-shape GPT training steps (forward, backward, AdamW; bf16 autocast), Prism vs uniform heads.
int run_train_bench(const BenchOptions& opt, const Report& report);

}  // namespace prism::device_bench
