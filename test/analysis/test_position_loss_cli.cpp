// prism eval --position-loss: the validation loss by query position at the trained
// context and past it (rotary positions; learned positions up to block_size), each
// batch's bucket means against PyTorch's per-token cross-entropy (val_loss_reference.py,
// transformers' Llama rotary code for RoPE), and the refusals.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "analysis/analysis_support.h"

using namespace prism::test;

namespace {

// A test-tiny run trained 4 steps on 32-token windows with room for 64 positions.
std::string train_run(const TempDir& dir, const std::string& shards, const std::string& name,
                      const std::string& position) {
  const std::string config = dir.file(name + ".yaml");
  write_file(config, fmt::format(
      "model: {{preset: test-tiny, vocab_size: 50257, block_size: 64, position: {}}}\n"
      "schedule: {{heads: [2, 4]}}\n"
      "train: {{batch_size: 4, seq_len: 32, max_steps: 4, lr: 3.0e-3, warmup_steps: 2, eval_every: 4,\n"
      "        eval_tokens: 256, distance_every: 0, checkpoint_every: 0, log_every: 4, threads: 1, dtype: fp32}}\n"
      "data: {{dir: {}}}\n",
      position, shards));
  const std::string out = dir.file("runs/" + name);
  auto t = run_prism(fmt::format("train {} --out {}", config, out));
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  CHECK_THAT(t.output, Catch::Contains("-> run.h5:/val/by_position/T32"));
  return out;
}

}  // namespace

TEST_CASE("prism eval --position-loss: loss by position past the trained context equals PyTorch's, learned and rope",
          "[analysis][eval][cli][rope]") {
  TempDir dir("prism-position-loss");
  const std::string shards = dir.file("shards");
  auto s = run_reference("make_shards.py", shards);
  INFO(s.output);
  REQUIRE(s.exit_code == 0);
  for (const std::string position : {"learned", "rope"}) {
    INFO(position);
    const std::string run = train_run(dir, shards, position, position);
    // 64-token windows, 4 x 64 per batch, 4 batches: positions 32-63 never trained.
    auto r = run_prism(fmt::format("eval {} --position-loss --context 64 --tokens 1024 --batch 4 --threads 1", run));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("loss by position at context 64 on 1024 validation tokens (4 batches of 4 x 64)"));
    CHECK_THAT(r.output, Catch::Contains("32-63") && Catch::Contains("past the trained context"));
    CHECK_THAT(r.output, Catch::Contains(position == "rope" ? "rotations the model never saw" : "never trained"));
    CHECK_THAT(r.output, Catch::Contains("/val/by_position/T64"));
    auto ref = run_reference("val_loss_reference.py",
                             fmt::format("{}/checkpoints/step_000004/model.safetensors {}/synth_val_000000.bin "
                                         "--batch 4 --seq 64 --batches 4",
                                         run, shards));
    INFO(ref.output);
    REQUIRE(ref.exit_code == 0);
    auto j = nlohmann::json::parse(ref.output);
    auto d = read_run(run + "/run.h5")["datasets"];
    CHECK(d["val/by_position/T64/bucket_lo"].get<std::vector<int64_t>>() == std::vector<int64_t>{0, 1, 2, 4, 8, 16, 32});
    auto by_batch = d["val/by_position/T64/loss_by_batch"].get<std::vector<std::vector<double>>>();
    auto want = j["by_position"].get<std::vector<std::vector<double>>>();
    REQUIRE(by_batch.size() == want.size());
    for (size_t b = 0; b < want.size(); ++b) {
      REQUIRE(by_batch[b].size() == 7);
      for (size_t k = 0; k < 7; ++k) CHECK(by_batch[b][k] == Approx(want[b][k]).margin(1e-4));
    }
    // The trained context's, written at the end of training, is still there.
    CHECK(d.count("val/by_position/T32/loss") == 1);
  }
  // Learned positions stop at block_size; a flag of --position-loss alone is refused without it.
  auto past = run_prism(fmt::format("eval {} --position-loss --context 128", dir.file("runs/learned")));
  CHECK(past.exit_code != 0);
  CHECK_THAT(past.output, Catch::Contains("learned positions stop at block_size 64") && Catch::Contains("Fix:"));
  auto stray = run_prism(fmt::format("eval {} --context 64 --task piqa --data x.jsonl", dir.file("runs/rope")));
  CHECK(stray.exit_code != 0);
  CHECK_THAT(stray.output, Catch::Contains("--context belongs to --position-loss"));
}

TEST_CASE("block_size 8192: a learned-position model trains, measures distance, checkpoints and evaluates at 8192",
          "[analysis][eval][cli][long]") {
  TempDir dir("prism-long-context");
  const std::string shards = dir.file("shards");
  auto s = run_reference("make_shards.py", shards + " --vocab 512 --train-tokens 40000 --val-tokens 20000");
  INFO(s.output);
  REQUIRE(s.exit_code == 0);
  const std::string config = dir.file("long.yaml");
  write_file(config, fmt::format(
      "model: {{preset: test-tiny, vocab_size: 512, block_size: 8192}}\n"
      "schedule: {{heads: [2, 4]}}\n"
      "train: {{batch_size: 1, seq_len: 8192, max_steps: 2, lr: 3.0e-3, warmup_steps: 1, eval_every: 2,\n"
      "        eval_tokens: 8192, distance_every: 2, distance_batch: 1, checkpoint_every: 2, log_every: 1,\n"
      "        threads: 2, dtype: fp32}}\n"
      "data: {{dir: {}}}\n",
      shards));
  const std::string run = dir.file("runs/long");
  auto t = run_prism(fmt::format("train {} --out {}", config, run));
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  CHECK_THAT(t.output, Catch::Contains("-> run.h5:/val/by_position/T8192"));
  auto d = read_run(run + "/run.h5")["datasets"];
  // The checkpoint keeps the 8192-row position table; the distance telemetry ran at 8192.
  auto D = d["attention/distance"].get<std::vector<std::vector<double>>>();
  REQUIRE(D.size() == 2);
  for (double x : D.back()) {
    CHECK(x > 0);
    CHECK(x < 8192);
  }
  auto lo = d["val/by_position/T8192/bucket_lo"].get<std::vector<int64_t>>();
  REQUIRE(lo.size() == 14);  // 0, 1, 2, 4, ..., 4096
  CHECK(lo.back() == 4096);
  // The checkpoint loads (8192 positions) and evaluates at its full context.
  auto e = run_prism(fmt::format("eval {} --position-loss --tokens 8192 --threads 2 --no-store", run));
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  CHECK_THAT(e.output, Catch::Contains("loss by position at context 8192 on 8192 validation tokens (1 batches of 1 x 8192)"));
  CHECK_THAT(e.output, Catch::Contains("4096-8191"));
}
