// prism data prepare: shards hold EOT + the tokens of each document, in order,
// val first; the output is the same for any thread count; a prepared directory
// is never damaged (refused without --force, kept when a redo fails).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "data_support.h"
#include "prism/data/prepare.h"
#include "prism/data/shard.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

std::vector<uint16_t> all_tokens(const std::vector<std::string>& shards) {
  std::vector<uint16_t> out;
  for (const auto& s : shards) {
    TokenShard t(s);
    out.insert(out.end(), t.tokens(), t.tokens() + t.size());
  }
  return out;
}

std::vector<uint16_t> expected(const Gpt2Tokenizer& tok, const std::vector<std::string>& docs) {
  std::vector<uint16_t> out;
  for (const auto& d : docs) {
    out.push_back(static_cast<uint16_t>(tok.eot()));
    for (auto t : tok.encode(d)) out.push_back(static_cast<uint16_t>(t));
  }
  return out;
}

// Documents with some variety, deterministic.
std::vector<std::string> sample_docs(int n) {
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i)
    docs.push_back(fmt::format("Document {}. It's the {}th one; naïve café, 日本 {}.\nSecond line {}\n", i, i,
                               std::string(i % 5, '!'), i * 31));
  return docs;
}

PrepareOptions base(const TempDir& dir, std::vector<std::string> inputs) {
  PrepareOptions o;
  o.inputs = std::move(inputs);
  o.output = dir.file("out");
  o.vocab = vocab_path();
  o.val_tokens = 200;
  o.shard_tokens = 500;
  o.threads = 3;
  return o;
}

}  // namespace

TEST_CASE("prepare: one document per file, EOT first, val shard then train shards by size", "[data]") {
  TempDir dir("prism-prepare");
  Gpt2Tokenizer tok(vocab_path());
  auto docs = sample_docs(60);
  fs::create_directories(dir.file("in/sub"));
  for (size_t i = 0; i < docs.size(); ++i)  // names sort in document order; half in a subdirectory
    write_file(dir.file(fmt::format("in/{}doc{:03d}.txt", i < 30 ? "" : "sub/", i)), docs[i]);
  write_file(dir.file("in/ignored.md"), "not text");
  auto s = prepare_corpus(base(dir, {dir.file("in")}));
  auto want = expected(tok, docs);
  CHECK(s.documents == 60);
  CHECK(s.files == 60);
  CHECK(s.tokens == want.size());
  CHECK(all_tokens(s.shards) == want);
  REQUIRE(s.shards.size() == 1 + (want.size() - 200 + 499) / 500);
  CHECK_THAT(s.shards[0], Catch::EndsWith("out/out_val_000000.bin"));
  CHECK_THAT(s.shards[1], Catch::EndsWith("out/out_train_000001.bin"));
  CHECK(shard_token_count(s.shards[0]) == 200);
  CHECK(shard_token_count(s.shards[1]) == 500);
  CHECK(s.val_tokens == 200);
  CHECK(s.train_tokens == want.size() - 200);
  auto stored = read_prepared(dir.file("out"));
  REQUIRE(stored);
  CHECK(stored->tokens == s.tokens);
  CHECK(stored->shards == s.shards);
  // No staging directory or temp file is left.
  size_t entries = std::distance(fs::directory_iterator(dir.file("out")), fs::directory_iterator());
  CHECK(entries == s.shards.size() + 2);  // + prepare.json and vocab.tiktoken
}

TEST_CASE("prepare: documents split on blank lines or on a marker line", "[data]") {
  TempDir dir("prism-prepare");
  Gpt2Tokenizer tok(vocab_path());
  write_file(dir.file("paras.txt"), "\n\nFirst para\nline two\n\n \n\nSecond  para\r\n\r\nThird\n");
  auto o = base(dir, {dir.file("paras.txt")});
  o.split = "blank-line";
  o.val_tokens = 3;
  auto s = prepare_corpus(o);
  CHECK(s.documents == 3);
  CHECK(all_tokens(s.shards) == expected(tok, {"First para\nline two", "Second  para", "Third"}));

  write_file(dir.file("marked.txt"), "<doc>\nalpha\n\nbeta\n<doc>\r\n<doc>\ngamma delta\n<doc>\n");
  o = base(dir, {dir.file("marked.txt")});
  o.output = dir.file("out2");
  o.split = "marker";
  o.marker = "<doc>";
  o.val_tokens = 3;
  s = prepare_corpus(o);
  CHECK(s.documents == 2);
  CHECK(all_tokens(s.shards) == expected(tok, {"alpha\n\nbeta", "gamma delta"}));
}

TEST_CASE("prepare: the shards are byte for byte the same on 1 and 4 threads, and a seed shuffles documents", "[data]") {
  TempDir dir("prism-prepare");
  Gpt2Tokenizer tok(vocab_path());
  auto docs = sample_docs(300);
  std::string text;
  for (const auto& d : docs) text += d + "\n";
  write_file(dir.file("all.txt"), text);
  auto run = [&](int threads, std::optional<uint64_t> seed, const std::string& out) {
    auto o = base(dir, {dir.file("all.txt")});
    o.split = "blank-line";
    o.threads = threads;
    o.shuffle_seed = seed;
    o.output = dir.file(out);
    return prepare_corpus(o);
  };
  auto one = run(1, std::nullopt, "one"), four = run(4, std::nullopt, "four");
  REQUIRE(one.shards.size() == four.shards.size());
  for (size_t i = 0; i < one.shards.size(); ++i) CHECK(read_file(one.shards[i]) == read_file(four.shards[i]));

  auto a = run(2, 5, "a"), b = run(4, 5, "b"), c = run(2, 6, "c");
  auto ta = all_tokens(a.shards), tb = all_tokens(b.shards), tc = all_tokens(c.shards), t1 = all_tokens(one.shards);
  CHECK(ta == tb);
  CHECK(ta != t1);
  CHECK(ta != tc);
  std::sort(ta.begin(), ta.end());
  std::sort(t1.begin(), t1.end());
  CHECK(ta == t1);  // the same documents, in another order
}

TEST_CASE("prepare: a prepared directory is refused without force and survives a failed redo", "[data]") {
  TempDir dir("prism-prepare");
  auto docs = sample_docs(80);
  fs::create_directories(dir.file("in"));
  for (size_t i = 0; i < docs.size(); ++i) write_file(dir.file(fmt::format("in/{:03d}.txt", i)), docs[i]);
  auto o = base(dir, {dir.file("in")});
  o.shard_tokens = 300;
  auto first = prepare_corpus(o);
  std::vector<std::string> before;
  for (const auto& s : first.shards) before.push_back(read_file(s));

  CHECK_THROWS_WITH(prepare_corpus(o), Catch::Contains("already holds prepared shards") && Catch::Contains("--force"));

  // A redo that fails half way (a file that is not UTF-8) leaves the old shards as they were.
  write_file(dir.file("in/zzz.txt"), std::string("fine text\nthen \xff bad"));
  o.force = true;
  CHECK_THROWS_WITH(prepare_corpus(o),
                    Catch::Contains("zzz.txt") && Catch::Contains("not valid UTF-8 at byte 15") && Catch::Contains("iconv"));
  for (size_t i = 0; i < first.shards.size(); ++i) CHECK(read_file(first.shards[i]) == before[i]);
  CHECK(read_prepared(o.output));

  // A successful redo with bigger shards replaces all of them, leaving no stale shard behind.
  fs::remove(dir.file("in/zzz.txt"));
  o.shard_tokens = 100000;
  auto again = prepare_corpus(o);
  CHECK(again.shards.size() == 2);
  size_t bins = 0;
  for (const auto& e : fs::directory_iterator(o.output)) bins += e.path().extension() == ".bin";
  CHECK(bins == 2);
}

TEST_CASE("prepare: missing input, too little text and bad options are errors with the fix", "[data]") {
  TempDir dir("prism-prepare");
  auto o = base(dir, {dir.file("nothing-here")});
  o.fetch_hint = "run data/get-corpus.sh first";
  CHECK_THROWS_WITH(prepare_corpus(o), Catch::Contains("nothing-here") && Catch::Contains("get-corpus.sh"));
  write_file(dir.file("tiny.txt"), "just a few words");
  o = base(dir, {dir.file("tiny.txt")});
  CHECK_THROWS_WITH(prepare_corpus(o), Catch::Contains("not more than the 200") && Catch::Contains("--val-tokens"));
  CHECK(!fs::exists(dir.file("out/out_val_000000.bin")));
  o.split = "marker";
  CHECK_THROWS_WITH(prepare_corpus(o), Catch::Contains("--marker"));
  o.split = "lines";
  CHECK_THROWS_WITH(prepare_corpus(o), Catch::Contains("unknown split"));
  o = base(dir, {dir.file("tiny.txt")});
  o.vocab = dir.file("no.tiktoken");
  CHECK_THROWS_WITH(prepare_corpus(o), Catch::Contains("no.tiktoken") && Catch::Contains("get-vocab.sh"));
}

TEST_CASE("prepare: the CLI runs a recipe, reports the summary and is idempotent with --if-missing", "[data][cli]") {
  TempDir dir("prism-prepare");
  auto docs = sample_docs(50);
  fs::create_directories(dir.file("text"));
  for (size_t i = 0; i < docs.size(); ++i) write_file(dir.file(fmt::format("text/{:03d}.txt", i)), docs[i]);
  write_file(dir.file("tiny.yaml"),
             "name: tiny\ninput: text\noutput: shards\nval_tokens: 100\nshard_tokens: 1000\nshuffle_seed: 3\n"
             "fetch: make-text.sh\n");
  std::string vocab = " --vocab '" + vocab_path() + "'";
  auto r = run_prism("data prepare -q --recipe '" + dir.file("tiny.yaml") + "'" + vocab);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("50 documents") && Catch::Contains("tiny_val_000000.bin"));
  CHECK(fs::exists(dir.file("shards/tiny_train_000001.bin")));
  CHECK(shard_token_count(dir.file("shards/tiny_val_000000.bin")) == 100);

  auto again = run_prism("data prepare --recipe '" + dir.file("tiny.yaml") + "'" + vocab);
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.output, Catch::Contains("already holds prepared shards"));
  auto skip = run_prism("data prepare --if-missing --recipe '" + dir.file("tiny.yaml") + "'" + vocab);
  CHECK(skip.exit_code == 0);
  CHECK_THAT(skip.output, Catch::Contains("already prepared"));

  write_file(dir.file("typo.yaml"), "input: text\noutput: x\nval_tokns: 5\n");
  auto typo = run_prism("data prepare --recipe '" + dir.file("typo.yaml") + "'" + vocab);
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("val_tokns"));
  write_file(dir.file("absent.yaml"), "input: not-fetched\noutput: x\nfetch: data/get-corpus.sh\n");
  auto absent = run_prism("data prepare --recipe '" + dir.file("absent.yaml") + "'" + vocab);
  CHECK(absent.exit_code == 2);
  CHECK_THAT(absent.output, Catch::Contains("not-fetched") && Catch::Contains("data/get-corpus.sh"));
  auto progress = run_prism("data prepare '" + dir.file("text") + "' -o '" + dir.file("p") + "' --val-tokens 50" + vocab);
  CHECK(progress.exit_code == 0);
  CHECK_THAT(progress.output, Catch::Contains("prepare: ") && Catch::Contains("MB/s") && Catch::Contains("ETA"));
}

TEST_CASE("prepare: --if-missing goes by prepare.json, never by the directory existing", "[data][cli]") {
  // As data/get-corpus.sh leaves the Austen corpus: the text inside the output directory, no shards yet.
  TempDir dir("prism-prepare");
  auto docs = sample_docs(30);
  fs::create_directories(dir.file("corpus/text"));
  for (size_t i = 0; i < docs.size(); ++i) write_file(dir.file(fmt::format("corpus/text/{:03d}.txt", i)), docs[i]);
  write_file(dir.file("r.yaml"), "name: r\ninput: corpus/text\noutput: corpus\nval_tokens: 100\nshard_tokens: 1000\n");
  const std::string cmd = "data prepare -q --if-missing --recipe '" + dir.file("r.yaml") + "' --vocab '" + vocab_path() + "'";
  auto first = run_prism(cmd);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.output, Catch::Contains("prepared ") && !Catch::Contains("already prepared"));
  REQUIRE(read_prepared(dir.file("corpus")));

  // A preparation killed while it swapped its shards in (shards, no manifest): --if-missing redoes it.
  fs::remove(dir.file("corpus/prepare.json"));
  write_file(dir.file("corpus/.prepare-swapping"), "\n");
  auto redo = run_prism(cmd);
  INFO(redo.output);
  CHECK(redo.exit_code == 0);
  CHECK(read_prepared(dir.file("corpus")));
  CHECK(!fs::exists(dir.file("corpus/.prepare-swapping")));

  // Shards of unknown origin are never replaced without --force.
  fs::remove(dir.file("corpus/prepare.json"));
  auto foreign = run_prism(cmd);
  CHECK(foreign.exit_code == 2);
  CHECK_THAT(foreign.output, Catch::Contains("already holds prepared shards") && Catch::Contains("--force"));
}

TEST_CASE("prepare: the vocabulary travels with the shards, with the unigram baseline in prepare.json", "[data][bpe]") {
  TempDir dir("prism-prepare");
  auto docs = sample_docs(60);
  fs::create_directories(dir.file("in"));
  for (size_t i = 0; i < docs.size(); ++i) write_file(dir.file(fmt::format("in/{:03d}.txt", i)), docs[i]);
  auto o = base(dir, {dir.file("in")});
  const auto s = prepare_corpus(o);
  CHECK(s.vocab == dir.file("out/vocab.tiktoken"));
  CHECK(read_file(s.vocab) == read_file(vocab_path()));  // GPT-2's, copied
  CHECK(s.vocab_size == 50257);
  CHECK_FALSE(s.vocab_trained);
  // The baseline, recomputed here from the shards: add-1/2 smoothed train frequencies scored on val.
  std::vector<double> counts(50257, 0.0);
  double n_train = 0;
  for (size_t i = 1; i < s.shards.size(); ++i) {
    TokenShard t(s.shards[i]);
    for (size_t k = 0; k < t.size(); ++k) counts[t[k]] += 1, n_train += 1;
  }
  TokenShard val(s.shards[0]);
  double ce = 0;
  for (size_t k = 0; k < val.size(); ++k) ce -= std::log((counts[val[k]] + 0.5) / (n_train + 0.5 * 50257));
  ce /= static_cast<double>(val.size());
  CHECK(s.unigram_val_loss == Approx(ce).epsilon(1e-12));
  const auto back = read_prepared(o.output);
  REQUIRE(back);
  CHECK(back->vocab == s.vocab);
  CHECK(back->vocab_size == 50257);
  CHECK(back->unigram_val_loss == Approx(s.unigram_val_loss).epsilon(1e-12));
}

TEST_CASE("prepare: a trained vocabulary never sees the validation documents", "[data][bpe]") {
  TempDir dir("prism-prepare");
  // Document order is the file order (no shuffle), so the first documents fill the validation shard.
  // The first one repeats a word found nowhere else; a vocabulary trained on all the text would
  // learn it whole, one trained on the training documents cannot.
  std::string secret;
  for (int i = 0; i < 400; ++i) secret += " quizzaciously";
  fs::create_directories(dir.file("in"));
  write_file(dir.file("in/000.txt"), "Validation." + secret + "\n");
  auto docs = sample_docs(300);
  for (size_t i = 0; i < docs.size(); ++i) write_file(dir.file(fmt::format("in/{:03d}.txt", i + 1)), docs[i]);
  auto o = base(dir, {dir.file("in")});
  o.vocab.clear();
  o.train_vocab = 300;
  o.val_tokens = 2000;
  o.shard_tokens = 100000;
  const auto s = prepare_corpus(o);
  CHECK(s.vocab_trained);
  CHECK(s.vocab_size == 300);
  Gpt2Tokenizer tok(s.vocab);
  CHECK(tok.encode(" quizzaciously").size() > 3);
  // The validation shard does begin with that document.
  TokenShard val(s.shards[0]);
  const auto first = tok.encode("Validation." + secret + "\n");
  REQUIRE(first.size() + 1 > val.size());  // the document fills the validation shard
  for (size_t k = 0; k + 1 < val.size(); ++k) REQUIRE(val[k + 1] == first[k]);
  // The same text among the training documents does shape the vocabulary.
  write_file(dir.file("in/999.txt"), "Training." + secret + "\n");
  o.force = true;
  const auto t = prepare_corpus(o);
  CHECK(Gpt2Tokenizer(t.vocab).encode(" quizzaciously").size() <= 2);
  // A vocabulary file and one to train are not both allowed.
  o.vocab = vocab_path();
  CHECK_THROWS_WITH(prepare_corpus(o), Catch::Contains("not both"));
}
