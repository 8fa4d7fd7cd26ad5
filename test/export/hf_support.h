#pragma once
// Fixtures of the Hugging Face export tests: a compact vocabulary (512 ids, so
// test-tiny's vocab_size) trained on the Austen corpus by `prism data vocab`,
// the corpus tokenised with it, and two small runs trained a few steps on it:
// a Prism schedule [2, 4] and a uniform [4, 4] trained without biases (so the
// GPT-2 export writes its zero biases); with `rotary`, a third: [2, 4] with
// rotary positions (head widths 32 and 16).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "data/data_support.h"
#include "support.h"

namespace prism::test {

struct CompactRuns {
  TempDir dir{"prism-hf"};
  std::string vocab = dir.file("austen-512.tiktoken");
  std::string shards = dir.file("shards");
  std::string prism = dir.file("runs/prism");
  std::string uniform = dir.file("runs/uniform");
  std::string rope = dir.file("runs/rope");

  explicit CompactRuns(int steps = 12, bool rotary = false) {
    const std::string text = austen_text_dir();
    auto r = run_prism(fmt::format("data vocab -q '{}' --size 512 -o '{}'", text, vocab));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    r = run_prism(fmt::format("data prepare '{}' -o '{}' --vocab '{}' --val-tokens 4096 -q", text, shards, vocab));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string config = dir.file("run.yaml");
    write_file(config, fmt::format(
        "model: {{preset: test-tiny}}\n"
        "schedule: {{heads: [2, 4]}}\n"
        "train: {{batch_size: 4, seq_len: 32, max_steps: {}, lr: 3.0e-3, warmup_steps: 2, eval_every: 0,\n"
        "        eval_tokens: 512, distance_every: 0, distance_batch: 2, checkpoint_every: 0, log_every: 4,\n"
        "        threads: 1, dtype: fp32}}\n"
        "data: {{dir: {}}}\n",
        steps, shards));
    std::vector<std::pair<std::string, std::string>> runs = {{prism, ""},
                                                             {uniform, "schedule.heads=[4,4] model.bias=false"}};
    if (rotary) runs.emplace_back(rope, "+model.position=rope +model.rope_theta=1000");
    for (const auto& [out, extra] : runs) {
      auto t = run_prism(fmt::format("train {} --out {} {}", config, out, extra));
      INFO(t.output);
      REQUIRE(t.exit_code == 0);
    }
  }
  std::string val_shard() const { return shards + "/shards_val_000000.bin"; }
};

// Runs a test/reference script and parses the last line of its output that is
// a JSON object (its report; progress bars of the libraries it calls go around it).
inline nlohmann::json reference_json(const std::string& script, const std::string& args) {
  auto r = run_reference(script, args);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  size_t at = r.output.rfind("\n{");
  at = at == std::string::npos ? 0 : at + 1;
  const size_t end = r.output.find('\n', at);
  return nlohmann::json::parse(r.output.substr(at, end == std::string::npos ? std::string::npos : end - at));
}

}  // namespace prism::test
