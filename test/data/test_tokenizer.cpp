// The GPT-2 tokenizer against tiktoken's gpt2 encoding (built offline from the
// same gpt2.tiktoken), and its errors for a missing or damaged vocabulary.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <thread>

#include "data_support.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;

namespace {

std::string first_difference(const std::vector<TokenId>& got, const std::vector<uint32_t>& want, const Gpt2Tokenizer& tok) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto show = [&](auto& v) {
    std::string s;
    for (size_t k = i; k < std::min(v.size(), i + 6); ++k) s += fmt::format("{}({:?}) ", v[k], std::string(tok.token_bytes(v[k])));
    return s;
  };
  return fmt::format("first difference at token {} of {} (tiktoken: {}); prism: {}; tiktoken: {}", i, got.size(),
                     want.size(), show(got), show(want));
}

// Generates the parity text (test/reference/tokenizer_text.py) into `dir`.
void make_text(const TempDir& dir, const std::string& extra = "") {
  auto gen = run_reference("tokenizer_text.py", fmt::format("'{}' --prose '{}' {}", dir.path(), austen_text_dir(), extra));
  INFO(gen.output);
  REQUIRE(gen.exit_code == 0);
}

std::vector<uint32_t> tiktoken_ids(const std::string& text_file, const std::string& out, bool special = false) {
  auto r = run_reference("tiktoken_gpt2.py",
                         fmt::format("encode '{}' '{}' '{}'{}", vocab_path(), text_file, out, special ? " --special" : ""));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return read_u32(out);
}

}  // namespace

TEST_CASE("tokenizer: ids equal tiktoken's gpt2 on several MB of prose, code, Unicode and edge cases", "[tokenizer]") {
  Gpt2Tokenizer tok(vocab_path());
  TempDir dir("prism-tokenizer");
  make_text(dir);
  size_t total_bytes = 0;
  for (std::string name : {"prose", "code", "unicode", "edge"}) {
    INFO(name);
    std::string text = read_file(dir.file(name + ".txt"));
    total_bytes += text.size();
    auto want = tiktoken_ids(dir.file(name + ".txt"), dir.file(name + ".ids"));
    auto got = tok.encode(text);
    REQUIRE(want.size() > text.size() / 10);  // the reference really ran on this text
    bool equal = std::equal(got.begin(), got.end(), want.begin(), want.end());
    INFO(first_difference(got, want, tok));
    CHECK(equal);
    CHECK(tok.decode(got) == text);
  }
  CHECK(total_bytes > 6u << 20);
}

TEST_CASE("tokenizer: encode_with_special turns <|endoftext|> into 50256 as tiktoken's allowed_special=all", "[tokenizer]") {
  Gpt2Tokenizer tok(vocab_path());
  TempDir dir("prism-tokenizer");
  make_text(dir, "--mb-code 0 --mb-unicode 0 --mb-edge 0.5");
  std::string text = read_file(dir.file("edge.txt"));
  auto want = tiktoken_ids(dir.file("edge.txt"), dir.file("edge.ids"), true);
  auto got = tok.encode_with_special(text);
  INFO(first_difference(got, want, tok));
  CHECK(std::equal(got.begin(), got.end(), want.begin(), want.end()));
  CHECK(std::count(got.begin(), got.end(), TokenId{50256}) > 100);
  CHECK(tok.decode(got) == text);
  // Ordinary encoding never produces EOT: the marker is plain text there.
  auto plain = tok.encode(text);
  CHECK(std::count(plain.begin(), plain.end(), TokenId{50256}) == 0);
  CHECK(tok.decode(plain) == text);
}

TEST_CASE("tokenizer: encoding on several threads at once gives the single-thread ids", "[tokenizer]") {
  Gpt2Tokenizer tok(vocab_path());
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += fmt::format("Chapter {}: it's {} o'clock,  naïve café 日本語 {}\n\n", i, i * 37 % 24, std::string(i % 7, ' '));
  auto want = tok.encode(text);
  std::vector<std::vector<TokenId>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got)
    threads.emplace_back([&tok, &text, &g] {
      for (int rep = 0; rep < 5; ++rep) g = tok.encode(text);
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) CHECK(g == want);
  CHECK(tok.decode(want) == text);
}

TEST_CASE("tokenizer: a missing or damaged vocabulary is an error naming the file, line and fix", "[tokenizer]") {
  TempDir dir("prism-vocab");
  auto error_of = [](const std::string& path) -> std::string {
    try {
      Gpt2Tokenizer tok(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  std::string missing = error_of(dir.file("nope.tiktoken"));
  CHECK_THAT(missing, Catch::Contains("nope.tiktoken") && Catch::Contains("not found") &&
                          Catch::Contains("data/get-vocab.sh"));

  std::string good = read_file(vocab_path());
  auto damaged = [&](const std::string& name, const std::string& text) {
    write_file(dir.file(name), text);
    return error_of(dir.file(name));
  };
  // Line 3 of the real file with its base64 broken.
  size_t l3 = good.find('\n', good.find('\n') + 1) + 1;
  std::string bad_b64 = good;
  bad_b64[l3] = '*';
  CHECK_THAT(damaged("b64.tiktoken", bad_b64),
             Catch::Contains("b64.tiktoken:3") && Catch::Contains("base64") && Catch::Contains("get-vocab.sh"));
  CHECK_THAT(damaged("rank.tiktoken", good.substr(0, l3) + "Iw== x2\n" + good.substr(good.find('\n', l3) + 1)),
             Catch::Contains("rank.tiktoken:3") && Catch::Contains("not a number"));
  CHECK_THAT(damaged("dup.tiktoken", good + "IQ== 7\n"), Catch::Contains("dup.tiktoken:50257") && Catch::Contains("twice"));
  CHECK_THAT(damaged("short.tiktoken", good.substr(0, good.size() / 2)),
             Catch::Contains("short.tiktoken") && Catch::Contains("get-vocab.sh"));
  CHECK_THAT(damaged("empty.tiktoken", ""), Catch::Contains("empty"));
  CHECK_THAT(damaged("words.tiktoken", "hello world\n"), Catch::Contains("words.tiktoken:1"));
}

TEST_CASE("tokenizer: invalid UTF-8 is an error with its byte offset, not a silent guess", "[tokenizer]") {
  Gpt2Tokenizer tok(vocab_path());
  for (std::string bad : {std::string("abc\xff"), std::string("abc\xc3"), std::string("ab\xed\xa0\x80"),
                          std::string("ab\xc0\xaf")}) {
    try {
      tok.encode(bad);
      FAIL("no error for invalid UTF-8");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("not valid UTF-8") && Catch::Contains("byte"));
    }
  }
  CHECK_THROWS_AS(tok.decode({50257}), Error);
}
