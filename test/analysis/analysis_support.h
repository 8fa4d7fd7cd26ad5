#pragma once
// Two small trained runs for the analysis tests: a Prism schedule [2, 4] and its
// uniform baseline [4, 4] (test-tiny, GPT-2 vocabulary), trained a few steps on
// the synthetic shards of test/reference/make_shards.py.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "support.h"

namespace prism::test {

struct TwoRuns {
  TempDir dir{"prism-analysis"};
  std::string shards = dir.file("shards");
  std::string prism = dir.file("runs/prism");
  std::string uniform = dir.file("runs/uniform");

  explicit TwoRuns(int steps = 12) {
    auto r = run_reference("make_shards.py", shards);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string config = dir.file("run.yaml");
    write_file(config, fmt::format(
        "model: {{preset: test-tiny, vocab_size: 50257}}\n"
        "schedule: {{heads: [2, 4]}}\n"
        "train: {{batch_size: 4, seq_len: 32, max_steps: {}, lr: 3.0e-3, warmup_steps: 2, eval_every: 4,\n"
        "        eval_tokens: 512, distance_every: 4, distance_batch: 2, checkpoint_every: 0, log_every: 4,\n"
        "        threads: 1, dtype: fp32}}\n"
        "data: {{dir: {}}}\n",
        steps, shards));
    for (const auto& [out, heads] : {std::pair{prism, "[2,4]"}, std::pair{uniform, "[4,4]"}}) {
      auto t = run_prism(fmt::format("train {} --out {} schedule.heads={}", config, out, heads));
      INFO(t.output);
      REQUIRE(t.exit_code == 0);
    }
  }
  std::string val_shard() const { return shards + "/synth_val_000000.bin"; }
};

inline nlohmann::json read_run(const std::string& h5) {
  auto r = run_reference("h5_json.py", h5);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

}  // namespace prism::test
