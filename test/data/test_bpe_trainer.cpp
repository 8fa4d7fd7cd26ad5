// The BPE trainer (bpe_trainer.h): a compact vocabulary trained on the Austen
// corpus loads in tiktoken and encodes exactly as Prism's tokenizer does, on the
// corpus and on text it never saw; merges follow the most frequent pair;
// training is deterministic; bad sizes are errors with the fix.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "data_support.h"
#include "prism/data/bpe_trainer.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

PieceCounts count_dir(const std::string& dir) {
  PieceCounts c;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".txt") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) c.add_text(read_file(f));
  return c;
}

std::vector<uint32_t> tiktoken_ids(const std::string& vocab, const std::string& text_file, const std::string& out) {
  auto r = run_reference("tiktoken_gpt2.py", fmt::format("encode '{}' '{}' '{}' --special", vocab, text_file, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return read_u32(out);
}

}  // namespace

TEST_CASE("bpe: merges follow the most frequent pair, weighted by piece counts", "[data][bpe]") {
  PieceCounts c;
  // Pieces: "aab" x1, " aab" x2, " ab" x2. Pairs: (a,b) 1+2+2 = 5, ( ,a) 2+2 = 4, (a,a) 1+2 = 3.
  c.add_text("aab aab aab ab ab");
  REQUIRE(c.counts().size() == 3);
  CHECK(c.pieces() == 5);
  BpeTrainOptions o;
  o.vocab_size = 256 + 3 + 1;
  auto v = train_bpe(c, o);
  REQUIRE(v.tokens.size() == 259);
  CHECK(v.tokens[256] == "ab");   // (a,b): 5
  CHECK(v.tokens[257] == "aab");  // then (a,ab): 1 + 2 = 3, above ( ,a) 2 and ( ,ab) 2
  CHECK(v.tokens[258] == " ab");  // ( ,ab) and ( ,aab) tie at 2: the pair of lower ids, (32, 256), first
  CHECK(v.vocab_size() == 260);
  for (int b = 0; b < 256; ++b) CHECK(v.tokens[static_cast<size_t>(b)] == std::string(1, static_cast<char>(b)));
}

TEST_CASE("bpe: a compact vocabulary trained on Austen encodes as tiktoken does with the same file", "[data][bpe]") {
  TempDir dir("prism-bpe");
  const PieceCounts counts = count_dir(austen_text_dir());
  CHECK(counts.bytes() > 3'000'000);
  BpeTrainOptions o;
  o.vocab_size = 2048;
  int calls = 0;
  o.progress = [&](int, int) { ++calls; };
  const auto v = train_bpe(counts, o);
  CHECK(calls > 1);
  REQUIRE(v.tokens.size() == 2047);
  std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
  CHECK(unique.size() == v.tokens.size());  // tiktoken requires distinct tokens
  const std::string file = dir.file("austen-2048.tiktoken");
  write_tiktoken_ranks(file, v);

  // Deterministic: training again writes the same bytes.
  write_tiktoken_ranks(dir.file("again.tiktoken"), train_bpe(counts, o));
  CHECK(read_file(dir.file("again.tiktoken")) == read_file(file));

  Gpt2Tokenizer tok(file);
  CHECK(tok.vocab_size() == 2048);
  CHECK(tok.eot() == 2047);
  // The corpus itself, and text it never saw (code, many scripts, edge cases, "<|endoftext|>").
  auto gen = run_reference("tokenizer_text.py",
                           fmt::format("'{}' --prose '{}' --mb-code 0.3 --mb-unicode 0.3 --mb-edge 0.3", dir.path(),
                                       austen_text_dir()));
  INFO(gen.output);
  REQUIRE(gen.exit_code == 0);
  size_t austen_tokens = 0;
  for (const char* name : {"prose.txt", "code.txt", "unicode.txt", "edge.txt"}) {
    INFO(name);
    const std::string text = read_file(dir.file(name));
    const auto want = tiktoken_ids(file, dir.file(name), dir.file(std::string(name) + ".ids"));
    const auto got = tok.encode_with_special(text);
    CHECK(std::equal(got.begin(), got.end(), want.begin(), want.end()));
    CHECK(tok.decode(got) == text);
    if (std::string(name) == "prose.txt") austen_tokens = got.size();
  }
  // It compresses the corpus it was trained on: under 3.2 bytes per token at 2048 ids (bytes alone: 1).
  CHECK(static_cast<double>(counts.bytes()) / static_cast<double>(austen_tokens) > 3.2);
}

TEST_CASE("bpe: sizes out of range and text too small for the size are errors with the fix", "[data][bpe]") {
  PieceCounts c;
  c.add_text("abab abab");
  BpeTrainOptions o;
  o.vocab_size = 100;
  CHECK_THROWS_WITH(train_bpe(c, o), Catch::Contains("258 to 65536"));
  o.vocab_size = 70000;
  CHECK_THROWS_WITH(train_bpe(c, o), Catch::Contains("258 to 65536"));
  o.vocab_size = 1000;
  CHECK_THROWS_WITH(train_bpe(c, o), Catch::Contains("only") && Catch::Contains("ask for at most"));
  CHECK_THROWS_WITH(c.add_text("bad \xff byte"), Catch::Contains("not valid UTF-8 at byte 4"));
}

TEST_CASE("bpe: prism data vocab writes a file the tokenizer and prepare use", "[data][bpe][cli]") {
  TempDir dir("prism-bpe");
  const std::string out = dir.file("v.tiktoken");
  auto r = run_prism(fmt::format("data vocab -q '{}' --size 600 -o '{}'", austen_text_dir(), out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("600 ids") && Catch::Contains("end-of-text at id 599"));
  CHECK(Gpt2Tokenizer(out).vocab_size() == 600);
  auto again = run_prism(fmt::format("data vocab -q '{}' --size 600 -o '{}'", austen_text_dir(), out));
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.output, Catch::Contains("exists") && Catch::Contains("--force"));
  auto none = run_prism(fmt::format("data vocab '{}' -o '{}'", austen_text_dir(), dir.file("x")));
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Catch::Contains("--size"));
}
