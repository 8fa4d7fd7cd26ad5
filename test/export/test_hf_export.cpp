// prism export --hf: the tokenizer files against tiktoken, the model loaded by
// transformers against prism on the same tokens (logits, greedy generation,
// attention distance), the format's errors, and lm-evaluation-harness run on
// the export against prism eval, item by item.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "export/hf_support.h"
#include "prism/train/loader.h"
#include "prism/data/tokenizer.h"
#include "prism/export/hf_remote_code.h"
#include "prism/export/hf_tokenizer.h"
#include "prism/model/sample.h"
#include "prism/store/safetensors.h"
#include "prism/train/checkpoint.h"

using namespace prism;
using namespace prism::test;
using json = nlohmann::json;

namespace {

void write_tokenizer(const std::string& vocab, const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, text] : hf_tokenizer_files(vocab, 1024).files) write_file(dir + "/" + name, text);
}

// What prism computes for a run: logits of the first held-out windows and the
// greedy continuation of a prompt, written for hf_roundtrip.py.
void write_expected(const std::string& run, const std::string& vocab, const std::string& shard, const std::string& out) {
  LoadedModel lm = load_model(run);
  lm.model->eval();
  LoaderOptions lo;
  lo.shards = {shard};
  lo.batch = 4;
  lo.seq_len = 32;
  lo.shuffle = false;
  auto tokens = TokenLoader(lo).next().first;
  torch::Tensor logits;
  {
    torch::NoGradGuard ng;
    logits = lm.model->forward(tokens).logits;
  }
  const std::string prompt_text = "It is a truth universally";
  Gpt2Tokenizer tok(vocab);
  std::vector<int64_t> prompt;
  for (auto id : tok.encode(prompt_text)) prompt.push_back(id);
  REQUIRE(prompt.size() < 24);
  SampleOptions so;
  so.max_new_tokens = 32 - static_cast<int64_t>(prompt.size());  // the whole context: generate() cannot pass it
  so.temperature = 0;
  so.stop_token = tok.eot();  // generate() stops after end-of-text too
  const auto greedy = sample(lm.model, prompt, so);
  save_safetensors(out, {{"tokens", tokens}, {"logits", logits}, {"prompt", torch::tensor(prompt)},
                         {"greedy", torch::tensor(greedy)}},
                   {{"prompt_text", prompt_text}});
}

}  // namespace

TEST_CASE("prism export --hf: the tokenizer files encode as tiktoken does, GPT-2's and a compact vocabulary",
          "[export][hf]") {
  TempDir dir("prism-hf-tok");
  const std::string compact = dir.file("austen-2048.tiktoken");
  auto r = run_prism(fmt::format("data vocab -q '{}' --size 2048 -o '{}'", austen_text_dir(), compact));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // The corpus and text no vocabulary was trained on: code, many scripts, emoji,
  // every White_Space character, contractions, long runs, "<|endoftext|>" inside text.
  auto gen = run_reference("tokenizer_text.py", fmt::format("'{}' --prose '{}' --mb-code 0.3 --mb-unicode 0.3 --mb-edge 0.3",
                                                            dir.path(), austen_text_dir()));
  INFO(gen.output);
  REQUIRE(gen.exit_code == 0);
  const std::string texts = fmt::format("'{0}/prose.txt' '{0}/code.txt' '{0}/unicode.txt' '{0}/edge.txt'", dir.path());

  for (const auto& [vocab, ranks, merges] : {std::tuple{vocab_path(), 50256, 50000}, std::tuple{compact, 2047, 2047 - 256}}) {
    INFO(vocab);
    const HfTokenizer t = hf_tokenizer_files(vocab, 1024);
    CHECK(t.ranks == ranks);
    CHECK(t.vocab_size() == ranks + 1);
    CHECK(t.merges == merges);  // one per token above the 256 bytes: both are BPE-trained
    CHECK(t.unmerged == 0);
    const std::string out = dir.file("tok-" + std::to_string(ranks));
    write_tokenizer(vocab, out);
    const json j = reference_json("hf_tokenizer_check.py", fmt::format("'{}' '{}' {}", out, vocab, texts));
    CHECK(j["len"] == ranks + 1);
    CHECK(j["eos_token_id"] == ranks);
    CHECK(j["bos_token_id"] == ranks);
    CHECK(j["eot_text_id"] == ranks);
    for (const auto& [name, f] : j["files"].items()) {
      INFO(name << ": " << f.dump());
      CHECK(f["tokens"].get<int64_t>() > 1000);
      CHECK(f["equal"] == true);             // tokenizer.json through AutoTokenizer
      CHECK(f["gpt2_files_equal"] == true);  // vocab.json + merges.txt through GPT2Tokenizer
      CHECK(f["decodes"] == true);
    }
  }
  // GPT-2's merges.txt is GPT-2's: its first merges, in the byte-level alphabet (Ġ is the space).
  const auto merges_txt = read_file(dir.file("tok-50256/merges.txt"));
  CHECK(merges_txt.rfind("#version: 0.2\nĠ t\nĠ a\nh e\ni n\nr e\no n\n", 0) == 0);
  CHECK(byte_level_alphabet()[' '] == "Ġ");
  CHECK(byte_level_alphabet()['a'] == "a");
  CHECK(byte_level_alphabet()[0] == "Ā");
}

TEST_CASE("prism export --hf: the embedded transformers code is scripts/hf's", "[export][hf]") {
  const auto& files = hf_remote_code_files();
  REQUIRE(files.size() == 2);
  for (const auto& f : files) {
    INFO(f.name);
    CHECK(std::string(f.text) == read_file(source_path("scripts/hf/" + f.name)));
  }
}

TEST_CASE("prism export --hf: transformers loads the export: logits, greedy tokens and attention distance equal prism's",
          "[export][hf]") {
  CompactRuns runs;
  struct Export {
    std::string run, format, dir, model_class;
    std::vector<int> heads;
  };
  const std::vector<Export> exports = {
      {runs.prism, "prism", runs.dir.file("hf/prism"), "PrismForCausalLM", {2, 4}},
      {runs.uniform, "prism", runs.dir.file("hf/uniform"), "PrismForCausalLM", {4, 4}},
      {runs.uniform, "gpt2", runs.dir.file("hf/uniform-gpt2"), "GPT2LMHeadModel", {4, 4}}};
  for (const auto& e : exports) {
    INFO(e.dir);
    auto r = run_prism(fmt::format("export {} --hf {} --hf-format {} --vocab {}", e.run, e.dir, e.format, runs.vocab));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("512 ids, 255 merges"));
    const json config = json::parse(read_file(e.dir + "/config.json"));
    CHECK(config["vocab_size"] == 512);
    CHECK(config["eos_token_id"] == 511);
    CHECK(config["prism"]["heads"].get<std::vector<int>>() == e.heads);
    if (e.format == "prism") CHECK(config["heads"].get<std::vector<int>>() == e.heads);
    CHECK(std::filesystem::exists(e.dir + "/modeling_prism.py") == (e.format == "prism"));
    CHECK(load_safetensors(e.dir + "/model.safetensors").metadata["format"] == "pt");
    CHECK_THAT(read_file(e.dir + "/README.md"),
               Catch::Contains(fmt::format("heads [{}]", fmt::join(e.heads, ","))) &&
                   Catch::Contains(e.format == "prism" ? "trust_remote_code=True" : "no remote code"));

    write_expected(e.run, runs.vocab, runs.val_shard(), runs.dir.file("expected.safetensors"));
    // prism distance on 4 batches of 2 x 32 held-out tokens, read in order; stored in the run's run.h5.
    r = run_prism(fmt::format("distance {} --data {} --seq-len 32 --batch 2 --tokens 256 --threads 1", e.run,
                              runs.val_shard()));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const json j = reference_json(
        "hf_roundtrip.py", fmt::format("--export {} --expected {} --run-h5 {}/run.h5 --shard {} --seq-len 32 --batch 2",
                                       e.dir, runs.dir.file("expected.safetensors"), e.run, runs.val_shard()));
    INFO(j.dump());
    CHECK(j["model_class"] == e.model_class);
    CHECK(j["logits_shape"] == json::array({4, 32, 512}));
    CHECK(j["logits_max_abs_diff"].get<double>() < 1e-4);
    CHECK(j["logits_eager_max_abs_diff"].get<double>() < 1e-4);
    CHECK(j["attention_heads"].get<std::vector<int>>() == e.heads);
    CHECK(j["attention_rows_sum_to_one"] == true);
    CHECK(j["greedy_prism"].size() >= 1);
    CHECK(j["greedy_equal"] == true);
    CHECK(j["prompt_ids_equal"] == true);
    CHECK(j["distance_batches"] == 4);
    CHECK(j["distance_max_abs_diff"].get<double>() < 1e-4);
  }
}

TEST_CASE("prism export --hf: a rotary model loads in transformers with prism's logits, greedy tokens and distance",
          "[export][hf][rope]") {
  CompactRuns runs(12, /*rotary=*/true);
  const std::string dir = runs.dir.file("hf/rope");
  auto r = run_prism(fmt::format("export {} --hf {} --vocab {}", runs.rope, dir, runs.vocab));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json config = json::parse(read_file(dir + "/config.json"));
  CHECK(config["position_embedding"] == "rope");
  CHECK(config["rope_theta"].get<double>() == 1000.0);
  for (const auto& t : load_safetensors(dir + "/model.safetensors").tensors) CHECK(t.first != "transformer.wpe.weight");
  CHECK_THAT(read_file(dir + "/README.md"), Catch::Contains("Positions are rotary"));
  write_expected(runs.rope, runs.vocab, runs.val_shard(), runs.dir.file("expected.safetensors"));
  r = run_prism(fmt::format("distance {} --data {} --seq-len 32 --batch 2 --tokens 256 --threads 1", runs.rope,
                            runs.val_shard()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json j = reference_json(
      "hf_roundtrip.py", fmt::format("--export {} --expected {} --run-h5 {}/run.h5 --shard {} --seq-len 32 --batch 2",
                                     dir, runs.dir.file("expected.safetensors"), runs.rope, runs.val_shard()));
  INFO(j.dump());
  CHECK(j["model_class"] == "PrismForCausalLM");
  CHECK(j["logits_max_abs_diff"].get<double>() < 1e-4);
  CHECK(j["logits_eager_max_abs_diff"].get<double>() < 1e-4);
  CHECK(j["attention_heads"].get<std::vector<int>>() == (std::vector<int>{2, 4}));
  CHECK(j["greedy_equal"] == true);  // with and without the KV cache: keys are cached rotated
  CHECK(j["distance_max_abs_diff"].get<double>() < 1e-4);
  // GPT2LMHeadModel has learned positions: a rotary model is refused, before anything is written.
  const std::string gpt2 = runs.dir.file("hf/rope-gpt2");
  r = run_prism(fmt::format("export {} --hf {} --hf-format gpt2 --vocab {}", runs.rope, gpt2, runs.vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("rotary") && Catch::Contains("--hf-format prism"));
  CHECK_FALSE(std::filesystem::exists(gpt2));
}

TEST_CASE("prism export --hf: refusals name the problem and the fix and write nothing, and the run's vocabulary is used",
          "[export][hf]") {
  CompactRuns runs(2);
  const std::string out = runs.dir.file("hf/out");
  // A Prism schedule has no GPT2LMHeadModel.
  auto r = run_prism(fmt::format("export {} --hf {} --hf-format gpt2 --vocab {}", runs.prism, out, runs.vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("schedule is [2,4]") && Catch::Contains("--hf-format prism"));
  CHECK_FALSE(std::filesystem::exists(out));
  // GPT-2's vocabulary (the default) has more ids than this 512-id model.
  r = run_prism(fmt::format("export {} --hf {} --vocab {}", runs.prism, out, vocab_path()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("50257 ids") && Catch::Contains("the model only 512") && Catch::Contains("--vocab"));
  CHECK_FALSE(std::filesystem::exists(out));
  // Without --vocab: the run's own vocabulary, which data prepare keeps beside the shards.
  const std::string own = runs.dir.file("hf/own");
  r = run_prism(fmt::format("export {} --hf {}", runs.prism, own));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("named by the run") && Catch::Contains("512 ids"));
  r = run_prism(fmt::format("export {} --hf {} --hf-format onnx --vocab {}", runs.prism, out, runs.vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("unknown Hugging Face format 'onnx'"));
  r = run_prism(fmt::format("export {} {} --hf {} --vocab {}", runs.prism, runs.uniform, out, runs.vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--hf exports one model, 2 paths given"));
  r = run_prism(fmt::format("export {} --what loss --vocab {}", runs.prism, runs.vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("belong to --hf"));
  // An existing export is replaced only with --force, and whole.
  r = run_prism(fmt::format("export {} --hf {} --vocab {}", runs.prism, out, runs.vocab));
  REQUIRE(r.exit_code == 0);
  write_file(out + "/stale.txt", "from before");
  r = run_prism(fmt::format("export {} --hf {} --vocab {}", runs.uniform, out, runs.vocab));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("not empty") && Catch::Contains("--force"));
  CHECK(json::parse(read_file(out + "/config.json"))["heads"] == json::array({2, 4}));
  r = run_prism(fmt::format("export {} --hf {} --vocab {} --force", runs.uniform, out, runs.vocab));
  CHECK(r.exit_code == 0);
  CHECK(json::parse(read_file(out + "/config.json"))["heads"] == json::array({4, 4}));
  CHECK_FALSE(std::filesystem::exists(out + "/stale.txt"));
  // The run's vocabulary (data.vocab, resolved from the corpus's prepare.json when it trained) without --vocab.
  r = run_prism(fmt::format("export {} --hf {} --force", runs.prism, out));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains(runs.shards + "/vocab.tiktoken (named by the run): 512 ids"));
  size_t siblings = 0;
  for (const auto& e : std::filesystem::directory_iterator(runs.dir.file("hf"))) siblings += e.is_directory();
  CHECK(siblings == 2);  // out and own: no .partial-* or .replaced-* left behind
}

namespace {

struct TaskFiles {
  std::string task, data, labels;
};

// Runs prism eval on every task file, exports the run, runs lm-evaluation-harness
// on the export with the same files, and returns hf_lm_eval_check.py's report.
json cross_check(const CompactRuns& runs, const std::vector<TaskFiles>& tasks) {
  const std::string hf = runs.dir.file("hf/prism");
  auto r = run_prism(fmt::format("export {} --hf {} --vocab {}", runs.prism, hf, runs.vocab));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::string args = fmt::format("--export {} --work {}", hf, runs.dir.file("lm_eval"));
  for (const auto& t : tasks) {
    const std::string dump = runs.dir.file("prism-" + t.task + ".json");
    r = run_prism(fmt::format("eval {} --task {} --data {} {} --vocab {} --dump {} --no-store --threads 1", runs.prism,
                              t.task, t.data, t.labels.empty() ? "" : "--labels " + t.labels, runs.vocab, dump));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    args += fmt::format(" --task {},data={},dump={}{}", t.task, t.data, dump, t.labels.empty() ? "" : ",labels=" + t.labels);
  }
  return reference_json("hf_lm_eval_check.py", args);
}

void check_agreement(const json& report, const std::vector<TaskFiles>& tasks) {
  for (const auto& t : tasks) {
    const json& j = report["tasks"][t.task];
    INFO(t.task << ": " << j.dump());
    CHECK(j["n"].get<int>() >= 4);
    CHECK(j["lm_eval_n"] == j["n"]);
    CHECK(j["text_mismatches"].empty());        // the same (context, continuation) strings
    CHECK(j["max_ll_diff"].get<double>() < 1e-3);  // fp32 sums over the continuation tokens
    CHECK(j["acc_mismatches"].empty());
    CHECK(j["lm_eval_acc"] == j["prism_acc"]);
    if (t.task == "winogrande") {
      CHECK(j["lm_eval_acc_norm"].is_null());  // lm-eval's WinoGrande has no acc_norm (its choices are contexts)
    } else {
      CHECK(j["normaliser_mismatches"].empty());  // acc_norm divides by the same length
      CHECK(j["acc_norm_mismatches"].empty());
      CHECK(j["lm_eval_acc_norm"] == j["prism_acc_norm"]);
    }
  }
}

}  // namespace

TEST_CASE("lm-evaluation-harness on the export scores every item as prism eval does", "[export][hf][lm_eval]") {
  CompactRuns runs;
  const std::vector<TaskFiles> tasks = {
      {"hellaswag", source_path("test/fixtures/hellaswag.jsonl"), ""},
      {"piqa", source_path("test/fixtures/piqa.jsonl"), source_path("test/fixtures/piqa-labels.lst")},
      {"arc_easy", source_path("test/fixtures/arc_easy.jsonl"), ""},
      {"winogrande", source_path("test/fixtures/winogrande.jsonl"), ""}};
  const json report = cross_check(runs, tasks);
  CHECK(report["lm_eval_version"] == "0.4.13");
  check_agreement(report, tasks);
}

// Accented Latin, dashes, guillemets, degree signs, CJK: the harness takes
// len() of the answer in characters for acc_norm and Python's str.capitalize()
// (Unicode) for HellaSwag's ctx_b.
TEST_CASE("lm-evaluation-harness on the export scores every item as prism eval does, on non-ASCII text",
          "[export][hf][lm_eval]") {
  CompactRuns runs;
  const std::string fixtures = source_path("test/export/fixtures/");
  const std::vector<TaskFiles> tasks = {{"hellaswag", fixtures + "hellaswag.jsonl", ""},
                                        {"piqa", fixtures + "piqa.jsonl", fixtures + "piqa-labels.lst"},
                                        {"arc_easy", fixtures + "arc_easy.jsonl", ""},
                                        {"winogrande", fixtures + "winogrande.jsonl", ""}};
  check_agreement(cross_check(runs, tasks), tasks);
}
