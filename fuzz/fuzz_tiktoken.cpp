// The tiktoken vocabulary reader (one "base64-bytes rank" per line): BpeRanks::load
// on arbitrary file contents. A vocabulary that loads must look every token up
// to its own rank, and single bytes to the rank of that byte.
#include <string_view>

#include "fuzz_support.h"
#include "prism/data/tokenizer_ranks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  const std::string path = scratch.write("vocab.tiktoken", std::string_view(reinterpret_cast<const char*>(data), size));
  prism::fuzz::expect_clean([&] {
    const prism::BpeRanks ranks = prism::BpeRanks::load(path, "run data/get-vocab.sh");
    for (uint32_t r = 0; r < ranks.size(); ++r)
      if (ranks.find(ranks.bytes(r)) != r) prism::fuzz::finding("a token does not look up to its own rank");
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      const uint32_t r = ranks.find(std::string_view(&c, 1));
      if (r == prism::BpeRanks::kNone || ranks.bytes(r) != std::string_view(&c, 1))
        prism::fuzz::finding("a loaded vocabulary lacks a single byte");
    }
  });
  return 0;
}
