#pragma once
// GPT-2's pre-tokenisation: the regex that cuts text into the pieces BPE merges
// within (never across), exactly as tiktoken's `gpt2` encoding cuts them.
// Shared by the tokenizer (tokenizer.h) and the BPE trainer (bpe_trainer.h), so
// a compact vocabulary is trained on the same pieces it will later encode.
//
// Thread safety: a Pretokenizer is immutable once built; pieces() may run on
// many threads at once (each thread keeps its own PCRE2 match state).
#include <memory>
#include <string_view>

namespace prism {

class Pretokenizer {
 public:
  // Compiles the pattern (PCRE2 with Unicode properties, JIT where the
  // platform has it). Throws prism::Error if PCRE2 lacks Unicode support.
  Pretokenizer();
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Calls f(piece) for every piece of `text` in order; the pieces cover the
  // text exactly. `text` must be valid UTF-8 (the caller checks: see
  // utf8_error_offset in tokenizer.h).
  template <class F>
  void for_each_piece(std::string_view text, F&& f) const {
    size_t off = 0;
    std::string_view piece;
    while (next(text, off, piece)) f(piece);
  }

  // The piece starting at `offset` (advanced past it); false at the end.
  bool next(std::string_view text, size_t& offset, std::string_view& piece) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism
