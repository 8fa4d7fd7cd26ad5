#pragma once
// Gpt2Tokenizer: a byte-level BPE with GPT-2's pre-tokenisation, id for id equal
// to tiktoken's encoding of the same ranks file and regex: GPT-2's own vocabulary
// (`gpt2.tiktoken`, 50256 ranks; data/get-vocab.sh puts it at
// data/cache/gpt2.tiktoken) or a compact one trained on a corpus (bpe_trainer.h)
// in the same format. Text is cut into pieces by GPT-2's pre-tokenisation regex
// (pretokenize.h), and each piece is merged by rank (lower rank merges first)
// from single bytes up. Ranks come from a tiktoken file (base64 token, space,
// rank); the end-of-text token's id is the number of ranks (50256 for GPT-2), so
// vocab_size() = ranks + 1.
//
// Special tokens: encode() is tiktoken's encode_ordinary: the text
// "<|endoftext|>" is ordinary text there (split like any other). Only
// encode_with_special() turns it into eot(), as tiktoken's
// encode(text, allowed_special="all") does. Data preparation never looks for
// it in documents; it inserts eot() itself before each document.
//
// Thread safety: a loaded tokenizer is immutable; encode()/decode() may run on
// many threads at once (each thread keeps its own match state and piece cache).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace prism {

using TokenId = uint32_t;

class Gpt2Tokenizer {
 public:
  static constexpr const char* kEndOfTextText = "<|endoftext|>";
  static constexpr int kGpt2Ranks = 50256;  // byte-level BPE ranks in gpt2.tiktoken (EOT is 50256)

  // Loads ranks from `vocab_path`. Throws prism::Error naming the file (and line)
  // for a missing file, a corrupt entry or more ranks than uint16 shards hold,
  // with the fix (run data/get-vocab.sh).
  explicit Gpt2Tokenizer(const std::string& vocab_path);
  ~Gpt2Tokenizer();
  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;

  // tiktoken's encode_ordinary. `text` must be valid UTF-8 (else prism::Error
  // giving the byte offset).
  std::vector<TokenId> encode(std::string_view text) const;
  // Appends to `out` (no reallocation when out has room): the hot path of
  // data preparation.
  void encode(std::string_view text, std::vector<TokenId>& out) const;
  // tiktoken's encode(allowed_special="all"): "<|endoftext|>" -> eot().
  std::vector<TokenId> encode_with_special(std::string_view text) const;

  // Bytes of the tokens (may end inside a UTF-8 sequence for partial input).
  // Throws prism::Error for an id outside the vocabulary.
  std::string decode(const std::vector<TokenId>& ids) const;
  std::string_view token_bytes(TokenId id) const;

  TokenId eot() const;              // = the number of ranks (50256 for GPT-2)
  int vocab_size() const;           // ranks + EOT (50257 for GPT-2)
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Offset of the first byte of `text` that is not valid UTF-8 (overlong forms,
// surrogates and code points above U+10FFFF included), or npos.
size_t utf8_error_offset(std::string_view text);

// Where prism looks for the vocabulary when none is given: $PRISM_VOCAB, else
// data/cache/gpt2.tiktoken under the current directory.
std::string default_vocab_path();

}  // namespace prism
