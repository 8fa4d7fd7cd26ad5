#pragma once
// Shared by the data tests: the vocabulary and corpus the recipes in data/ put
// in data/cache, required (a missing file fails the test with the fix).
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support.h"

namespace prism::test {

inline std::string vocab_path() {
  std::string p = source_path("data/cache/gpt2.tiktoken");
  if (!std::filesystem::exists(p)) FAIL(p << " is missing. Fix: run data/get-vocab.sh (scripts/setup.sh does)");
  return p;
}

inline std::string austen_text_dir() {
  std::string p = source_path("data/cache/austen/text");
  if (!std::filesystem::exists(p + "/.complete"))
    FAIL(p << " is missing. Fix: run data/get-corpus.sh (scripts/setup.sh does)");
  return p;
}

// A little-endian uint32 file as written by test/reference/tiktoken_gpt2.py.
inline std::vector<uint32_t> read_u32(const std::string& path) {
  std::string bytes = read_file(path);
  std::vector<uint32_t> v(bytes.size() / 4);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = uint32_t(uint8_t(bytes[4 * i])) | uint32_t(uint8_t(bytes[4 * i + 1])) << 8 |
           uint32_t(uint8_t(bytes[4 * i + 2])) << 16 | uint32_t(uint8_t(bytes[4 * i + 3])) << 24;
  return v;
}

}  // namespace prism::test
