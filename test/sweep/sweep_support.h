#pragma once
// Shared by the sweep tests: a temp directory with small synthetic token
// shards, and sweep files for a tiny model that trains in about a second.
#include <fmt/format.h>

#include <string>

#include "support.h"

namespace prism::test {

// A 4-layer test-tiny model with GPT-2's vocabulary; a few steps of batch 2 x 16.
inline std::string tiny_base(const std::string& data_dir, int max_steps = 6) {
  return fmt::format(
      "model: {{preset: test-tiny, vocab_size: 50257, n_layer: 4}}\n"
      "schedule: {{heads: [4, 4, 4, 4]}}\n"
      "train: {{batch_size: 2, seq_len: 16, max_steps: {}, lr: 3.0e-3, warmup_steps: 2, eval_every: 3,\n"
      "        eval_tokens: 64, distance_every: 0, distance_batch: 1, checkpoint_every: 2, log_every: 1,\n"
      "        dtype: fp32}}\n"
      "data: {{dir: {}}}\n",
      max_steps, data_dir);
}

struct SweepFixture {
  TempDir dir{"prism-sweep"};
  std::string shards = dir.file("shards");
  SweepFixture() {
    auto r = run_reference("make_shards.py", shards + " --train-tokens 20000 --val-tokens 4000");
    if (r.exit_code != 0) throw std::runtime_error("make_shards.py failed: " + r.output);
  }
  // Writes <name> = the tiny base config + `sweep_yaml` (the `sweep:` section and any more keys).
  std::string sweep_file(const std::string& name, const std::string& sweep_yaml, int max_steps = 6) {
    write_file(dir.file(name), tiny_base(shards, max_steps) + sweep_yaml);
    return dir.file(name);
  }
};

}  // namespace prism::test
