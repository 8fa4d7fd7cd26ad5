// The GPT-2 tokenizer's encode on arbitrary bytes, with the real vocabulary
// (data/cache/gpt2.tiktoken, or $PRISM_VOCAB). Invalid UTF-8 must be refused at
// the first bad byte (checked against a plain decoder written here); valid text
// must encode to ids inside the vocabulary that decode to the text again, the
// same on a second call (which reads the piece cache the first one filled), and
// encode_with_special must agree with encode where the text has no <|endoftext|>,
// and the ids must equal a naive reference BPE (GPT-2's regex, then the
// lowest-rank adjacent pair merged first, leftmost on ties, until none is left;
// a piece that is a token as a whole is that token, as in tiktoken)
// that checks the short-piece, long-piece and cached merge paths alike.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "prism/data/tokenizer.h"
#include "prism/data/tokenizer_ranks.h"

namespace {

// The offset of the first invalid UTF-8 sequence (RFC 3629: no overlongs,
// surrogates or code points above U+10FFFF), or npos. Deliberately naive.
size_t reference_utf8_error(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c <= 0x7f) len = 1;
    else if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c == 0xe0) len = 3, lo = 0xa0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) len = 3;
    else if (c == 0xed) len = 3, hi = 0x9f;
    else if (c == 0xf0) len = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) len = 4;
    else if (c == 0xf4) len = 4, hi = 0x8f;
    else return i;
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xbf)) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string vocab_path() {
  const char* env = std::getenv("PRISM_VOCAB");
  return env && *env ? std::string(env) : prism::fuzz::source_path("data/cache/gpt2.tiktoken");
}

const prism::Gpt2Tokenizer& tokenizer() {
  static const prism::Gpt2Tokenizer t(vocab_path());
  return t;
}

// tiktoken's GPT-2 pattern with \s spelled as Unicode White_Space, as the tokenizer documents it.
#define WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
constexpr const char* kPattern = "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";
#undef WS

// The reference: false when a piece is too long for the naive merge (quadratic).
bool reference_encode(std::string_view text, std::vector<prism::TokenId>& out) {
  static const prism::BpeRanks ranks = prism::BpeRanks::load(vocab_path(), "run data/get-vocab.sh");
  static pcre2_code* code = [] {
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &at, nullptr);
    if (!c) prism::fuzz::finding("the reference regex does not compile");
    return c;
  }();
  pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  bool complete = true;
  for (size_t off = 0; off < text.size();) {
    if (pcre2_match(code, subject, text.size(), off, 0, match, nullptr) < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    const std::string_view piece = text.substr(ov[0], ov[1] - ov[0]);
    off = ov[1];
    if (piece.size() > 300) {  // long enough for the heap-based merge (over 128 bytes), short enough to stay fast
      complete = false;
      break;
    }
    if (const uint32_t whole = ranks.find(piece); whole != prism::BpeRanks::kNone) {  // tiktoken's shortcut
      out.push_back(whole);
      continue;
    }
    std::vector<std::string_view> parts;
    for (size_t i = 0; i < piece.size(); ++i) parts.push_back(piece.substr(i, 1));
    while (parts.size() > 1) {
      uint32_t best = prism::BpeRanks::kNone;
      size_t at = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const uint32_t r = ranks.find(std::string_view(parts[i].data(), parts[i].size() + parts[i + 1].size()));
        if (r < best) best = r, at = i;
      }
      if (best == prism::BpeRanks::kNone) break;
      parts[at] = std::string_view(parts[at].data(), parts[at].size() + parts[at + 1].size());
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    for (auto p : parts) out.push_back(ranks.find(p));
  }
  pcre2_match_data_free(match);
  return complete;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t bad = reference_utf8_error(text);
  if (prism::utf8_error_offset(text) != bad) prism::fuzz::finding("utf8_error_offset disagrees with the reference decoder");
  if (bad != std::string_view::npos) {
    try {
      tok.encode(text);
    } catch (const prism::Error& e) {
      if (std::string(e.what()).find("byte " + std::to_string(bad)) == std::string::npos)
        prism::fuzz::finding(std::string("the UTF-8 error names another byte: ") + e.what());
      return 0;
    }
    prism::fuzz::finding("invalid UTF-8 was encoded");
  }
  prism::fuzz::expect_clean([&] {
    const std::vector<prism::TokenId> ids = tok.encode(text);
    for (prism::TokenId id : ids)
      if (id >= tok.eot()) prism::fuzz::finding("an id outside the ranks");
    if (tok.decode(ids) != text) prism::fuzz::finding("decode(encode(text)) != text");
    if (tok.encode(text) != ids) prism::fuzz::finding("a second encode (from the piece cache) differs");
    if (text.find(prism::Gpt2Tokenizer::kEndOfTextText) == std::string_view::npos && tok.encode_with_special(text) != ids)
      prism::fuzz::finding("encode_with_special differs from encode on text without <|endoftext|>");
    std::vector<prism::TokenId> reference;
    if (reference_encode(text, reference) && reference != ids)
      prism::fuzz::finding("encode differs from the naive reference BPE");
  });
  return 0;
}
