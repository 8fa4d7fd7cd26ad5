// A config's vocabulary follows its data (dataset.h): model.vocab_size: auto
// takes prepare.json's, an explicit size must hold the data's ids, and llm.c's
// shards (no manifest) stay GPT-2's.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "data_support.h"
#include "small_corpus.h"
#include "support.h"
#include "prism/config/config.h"
#include "prism/data/dataset.h"
#include "prism/data/prepare.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;

namespace {

Config config_for(const std::string& data_dir, const std::string& model_extra = "") {
  const std::string yaml = fmt::format("model: {{preset: test-tiny{}}}\ndata: {{dir: '{}'}}\n", model_extra, data_dir);
  return parse_config(YAML::Load(yaml), "test");
}

}  // namespace

TEST_CASE("dataset: vocab_size auto follows prepare.json, and explicit sizes must hold the data's ids", "[data][config]") {
  TempDir dir("prism-dataset");
  const auto s = prepare_small_corpus(dir, 300);
  const std::string data = dir.file("data");
  REQUIRE(s.vocab_size == 300);

  Config c = config_for(data);
  CHECK(c.model.vocab_from_data);
  CHECK_THAT(to_yaml(c), Catch::Contains("vocab_size: auto"));
  resolve_data_settings(c);
  CHECK(c.model.vocab_size == 300);
  CHECK_FALSE(c.model.vocab_from_data);
  CHECK(c.data.vocab == s.vocab);
  CHECK(vocab_path_for(c) == s.vocab);
  CHECK(open_tokenizer(c).vocab_size() == 300);
  // The resolved config says so, and reads back the same.
  const Config again = parse_config(YAML::Load(to_yaml(c)), "again");
  CHECK(again.model.vocab_size == 300);
  CHECK(again.data.vocab == s.vocab);
  CHECK(describe_data(data).unigram_val_loss == Approx(s.unigram_val_loss));

  // prism schedule resolves it as training does (parameter counts depend on it), and says from where.
  auto shown = run_prism(fmt::format("schedule inspect --model test-tiny data.dir={}", data));
  INFO(shown.output);
  CHECK(shown.exit_code == 0);
  CHECK_THAT(shown.output, Catch::Contains(fmt::format("vocab 300 (from {})", data)));
  CHECK_THAT(run_prism("schedule check --model test-tiny").output,
             Catch::Contains("vocab 512 (the preset's: no data.dir to take it from)"));

  Config padded = config_for(data, ", vocab_size: 512");
  resolve_data_settings(padded);
  CHECK(padded.model.vocab_size == 512);  // more ids than the data's is fine (padding)
  Config small = config_for(data, ", vocab_size: 200");
  CHECK_THROWS_WITH(resolve_data_settings(small), Catch::Contains("smaller than the data's vocabulary of 300") &&
                                                      Catch::Contains("auto"));

  // No manifest (llm.c's shards): the preset's vocabulary and GPT-2's tokenizer file.
  Config plain = config_for(dir.file("llmc"));
  resolve_data_settings(plain);
  CHECK(plain.model.vocab_size == 512);  // test-tiny's
  CHECK(plain.data.vocab.empty());
  CHECK(vocab_path_for(plain) == default_vocab_path());
  // A tokenizer with more ids than the model is refused, naming the fix.
  plain.data.vocab = vocab_path();
  CHECK_THROWS_WITH(open_tokenizer(plain), Catch::Contains("50257 ids") && Catch::Contains("512"));
}
