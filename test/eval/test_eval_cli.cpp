// prism eval end to end: a model trained on the gold answers of the fixtures,
// its per-choice log-likelihoods and accuracies against the Python reference
// (the harness's conventions written out again, PyTorch, tiktoken), /eval in
// run.h5, and the errors for bad input.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "analysis/analysis_support.h"
#include "data/data_support.h"

using namespace prism::test;

namespace {

struct TaskFile {
  std::string task, file, extra;
};

std::vector<TaskFile> task_files() {
  return {{"hellaswag", source_path("test/fixtures/hellaswag.jsonl"), ""},
          {"piqa", source_path("test/fixtures/piqa.jsonl"), "--labels " + source_path("test/fixtures/piqa-labels.lst")},
          {"arc_easy", source_path("test/fixtures/arc_easy.jsonl"), ""},
          {"winogrande", source_path("test/fixtures/winogrande.jsonl"), ""}};
}

}  // namespace

TEST_CASE("prism eval: a model trained on the gold answers picks them, Python agrees on every number", "[eval][cli]") {
  TempDir dir("prism-eval");
  const std::string vocab = vocab_path();
  // The gold texts of every fixture item, ten times over: the model's whole training data.
  std::string corpus;
  for (const auto& t : task_files()) {
    auto r = run_reference("eval_reference.py",
                           fmt::format("corpus --task {} --data {} {} --repeat 10", t.task, t.file, t.extra));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    corpus += r.output;
  }
  write_file(dir.file("gold.txt"), corpus);
  auto r = run_prism(fmt::format("data prepare {} -o {} --split blank-line --val-tokens 600 --vocab {} -q",
                                 dir.file("gold.txt"), dir.file("shards"), vocab));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  write_file(dir.file("run.yaml"),
             fmt::format("model: {{preset: test-tiny, vocab_size: 50257, block_size: 64}}\n"
                         "schedule: {{heads: [4, 4]}}\n"
                         "train: {{batch_size: 4, seq_len: 32, max_steps: 60, lr: 2.0e-2, warmup_steps: 5, "
                         "eval_every: 0, eval_tokens: 256, distance_every: 0, distance_batch: 1, checkpoint_every: 0, "
                         "log_every: 20, threads: 1, dtype: fp32}}\n"
                         "data: {{dir: {}}}\n",
                         dir.file("shards")));
  const std::string run_dir = dir.file("memo");
  r = run_prism(fmt::format("train {} --out {}", dir.file("run.yaml"), run_dir));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  for (const auto& t : task_files()) {
    INFO(t.task);
    const std::string dump = dir.file(t.task + ".json");
    r = run_prism(fmt::format("eval {} --task {} --data {} {} --dump {} --vocab {} --threads 1 --batch-tokens 256",
                              run_dir, t.task, t.file, t.extra, dump, vocab));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("lm-evaluation-harness conventions"));
    CHECK_THAT(r.output, Catch::Contains("results -> " + run_dir + "/run.h5:/eval/" + t.task));
    auto d = nlohmann::json::parse(read_file(dump));
    // HellaSwag, PIQA and ARC distractors are made of words the model never saw:
    // it must pick every gold answer. (WinoGrande's options share the scored suffix;
    // this small model is checked against the reference only.)
    if (t.task != "winogrande") {
      CHECK(d["acc"] == 1.0);
      CHECK(d["acc_norm"] == 1.0);
    }
    auto ref = run_reference("eval_reference.py",
                             fmt::format("check --task {} --data {} {} --vocab {} --checkpoint "
                                         "{}/checkpoints/step_000060/model.safetensors --dump {}",
                                         t.task, t.file, t.extra, vocab, run_dir, dump));
    INFO(ref.output);
    REQUIRE(ref.exit_code == 0);
    auto j = nlohmann::json::parse(ref.output);
    CHECK(j["items"] == d["n"]);
    CHECK(j["text_mismatches"].empty());
    CHECK(j["token_mismatches"].empty());
    CHECK(j["lengths_match"] == true);
    CHECK(j["max_ll_diff"].get<double>() < 2e-3);
    // acc / acc_norm from the same log-likelihoods, computed in Python with numpy.
    CHECK(j["acc_from_dump"].get<double>() == d["acc"].get<double>());
    CHECK(j["acc_norm_from_dump"].get<double>() == d["acc_norm"].get<double>());
    CHECK(j["acc_bytes_from_dump"].get<double>() == d["acc_bytes"].get<double>());
    std::vector<int> pred, pred_norm, pred_bytes;
    for (const auto& item : d["items"]) {
      pred.push_back(item["pred"]);
      pred_norm.push_back(item["pred_norm"]);
      pred_bytes.push_back(item["pred_bytes"]);
    }
    CHECK(j["pred_from_dump"].get<std::vector<int>>() == pred);
    CHECK(j["pred_norm_from_dump"].get<std::vector<int>>() == pred_norm);
    CHECK(j["pred_bytes_from_dump"].get<std::vector<int>>() == pred_bytes);
    // And from its own PyTorch log-likelihoods.
    CHECK(j["acc_own"].get<double>() == d["acc"].get<double>());
  }
  auto h5 = read_run(run_dir + "/run.h5");
  for (const auto& t : task_files()) {
    INFO(t.task);
    CHECK(h5["datasets"]["eval/" + t.task + "/n"].get<int>() == (t.task == "hellaswag" ? 5 : 4));
    CHECK(h5["datasets"].count("eval/" + t.task + "/acc") == 1);
    CHECK(h5["datasets"]["eval/" + t.task + "/items/label"].size() == h5["datasets"]["eval/" + t.task + "/n"].get<size_t>());
    CHECK_THAT(h5["group_attrs"]["eval/" + t.task]["convention"].get<std::string>(), Catch::Contains("length in characters (Python's len()"));
  }
  CHECK(h5["datasets"]["eval/hellaswag/acc"] == 1.0);
  CHECK(h5["attrs"]["status"] == "completed");
  r = run_prism(fmt::format("export {} --what eval", run_dir));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("memo,\"4,4\",0,hellaswag,1,1,5,0,0"));
}

TEST_CASE("prism eval: bad input is a clear error, before any scoring", "[eval][cli]") {
  TwoRuns runs(2);
  const std::string vocab = vocab_path();
  const std::string hs = source_path("test/fixtures/hellaswag.jsonl");
  // Line 3 is broken, line 4 has a label out of range.
  std::string lines = read_file(hs);
  size_t second = lines.find('\n', lines.find('\n') + 1) + 1;
  std::string broken = lines.substr(0, second) + "{\"ctx\": \"x\"\n" +
                       R"({"ctx": "c", "endings": ["a", "b", "c", "d"], "label": 4})" + "\n" + lines.substr(second);
  write_file(runs.dir.file("hs.jsonl"), broken);
  auto r = run_prism(fmt::format("eval {} --task hellaswag --data {} --vocab {}", runs.prism, runs.dir.file("hs.jsonl"), vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("hs.jsonl:3") && Catch::Contains("not valid JSON") &&
                           Catch::Contains("--on-error skip"));
  r = run_prism(fmt::format("eval {} --task hellaswag --data {} --vocab {} --on-error skip --no-store --threads 1",
                            runs.prism, runs.dir.file("hs.jsonl"), vocab));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("hs.jsonl:3") && Catch::Contains("hs.jsonl:4: label 4 is out of range"));
  CHECK_THAT(r.output, Catch::Contains("n 5"));
  CHECK_FALSE(read_run(runs.prism + "/run.h5")["datasets"].count("eval/hellaswag/acc"));  // --no-store
  // Results for a checkpoint of one schedule never go into a run of another.
  r = run_prism(fmt::format("eval {} --task hellaswag --data {} --vocab {} --out {}/run.h5", runs.prism, hs, vocab,
                            runs.uniform));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("schedule is [4,4], the checkpoint's [2,4]"));
  CHECK_THAT(r.output, !Catch::Contains("acc "));
  // A checkpoint outside a run directory needs --out (or --no-store).
  std::filesystem::copy_file(runs.prism + "/checkpoints/step_000002/model.safetensors", runs.dir.file("m.safetensors"));
  r = run_prism(fmt::format("eval {} --task hellaswag --data {} --vocab {}", runs.dir.file("m.safetensors"), hs, vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--out FILE.h5"));
  r = run_prism(fmt::format("eval {} --task piqa --data {} --vocab {}", runs.prism,
                            source_path("test/fixtures/piqa.jsonl"), vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("piqa.jsonl:1") && Catch::Contains("no label"));
  r = run_prism(fmt::format("eval {} --task mmlu --data {}", runs.prism, hs));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("unknown task 'mmlu'"));
}
