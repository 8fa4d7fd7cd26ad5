#include "prism/export/hf_tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "prism/data/tokenizer.h"
#include "prism/data/tokenizer_ranks.h"

namespace prism {

namespace {

using ordered_json = nlohmann::ordered_json;

// GPT-2's pre-tokenisation pattern exactly as tiktoken spells it; the tokenizers
// library's regex engine reads \s as Unicode White_Space, as tiktoken's does.
constexpr const char* kGpt2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string byte_level(std::string_view bytes) {
  const auto& alphabet = byte_level_alphabet();
  std::string s;
  for (char c : bytes) s += alphabet[static_cast<unsigned char>(c)];
  return s;
}

// tiktoken's BPE on `token` using only ranks below `max_rank`: repeatedly join the
// adjacent pair of lowest rank (leftmost on ties). Returns the part boundaries.
std::vector<size_t> bpe_parts(const BpeRanks& ranks, std::string_view token, uint32_t max_rank) {
  std::vector<size_t> starts(token.size() + 1);
  for (size_t i = 0; i <= token.size(); ++i) starts[i] = i;
  while (starts.size() > 2) {
    uint32_t best = max_rank;
    size_t at = 0;
    for (size_t i = 0; i + 2 < starts.size(); ++i) {
      uint32_t r = ranks.find(token.substr(starts[i], starts[i + 2] - starts[i]));
      if (r < best) best = r, at = i;
    }
    if (best == max_rank) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  return starts;
}

ordered_json special_token(int id) {
  return {{"id", id},          {"content", Gpt2Tokenizer::kEndOfTextText}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", false},                      {"special", true}};
}

// The vocabulary in the byte-level alphabet (rank = id) and one merge per token
// that a pair of lower ranks joins into, in rank order.
struct ByteLevelBpe {
  ordered_json vocab = ordered_json::object();
  std::vector<std::string> merges;  // "left right"
  int unmerged = 0;
};

ByteLevelBpe byte_level_bpe(const BpeRanks& ranks) {
  ByteLevelBpe b;
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    const std::string_view token = ranks.bytes(r);
    b.vocab[byte_level(token)] = r;
    if (token.size() < 2) continue;
    const auto parts = bpe_parts(ranks, token, r);
    if (parts.size() != 3) {  // no pair of lower ranks joins into this token
      ++b.unmerged;
      continue;
    }
    b.merges.push_back(byte_level(token.substr(0, parts[1])) + " " + byte_level(token.substr(parts[1])));
  }
  return b;
}

ordered_json tokenizer_json(const ByteLevelBpe& bpe, int eot) {
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", ordered_json::array({special_token(eot)})},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             ordered_json::array(
                 {{{"type", "Split"}, {"pattern", {{"Regex", kGpt2Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                  {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}})}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", true},
            {"vocab", bpe.vocab},
            {"merges", bpe.merges}}}};
}

ordered_json tokenizer_config(int eot, int64_t model_max_length) {
  const std::string text = Gpt2Tokenizer::kEndOfTextText;
  ordered_json added = special_token(eot);
  added.erase("id");
  return {{"tokenizer_class", "PreTrainedTokenizerFast"},
          {"bos_token", text},
          {"eos_token", text},
          {"unk_token", text},
          {"add_bos_token", false},
          {"add_prefix_space", false},
          {"clean_up_tokenization_spaces", false},
          {"model_max_length", model_max_length},
          {"added_tokens_decoder", {{std::to_string(eot), added}}}};
}

}  // namespace

const std::vector<std::string>& byte_level_alphabet() {
  static const std::vector<std::string> alphabet = [] {
    std::vector<std::string> a(256);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      a[b] = utf8(printable ? b : next++);
    }
    return a;
  }();
  return alphabet;
}

HfTokenizer hf_tokenizer_files(const std::string& ranks_path, int64_t model_max_length) {
  const BpeRanks ranks = BpeRanks::load(ranks_path, "pass the vocabulary the run was trained with (--vocab FILE)");
  const ByteLevelBpe bpe = byte_level_bpe(ranks);
  HfTokenizer out;
  out.ranks = static_cast<int>(ranks.size());
  out.merges = static_cast<int>(bpe.merges.size());
  out.unmerged = bpe.unmerged;
  const std::string eot = Gpt2Tokenizer::kEndOfTextText;
  const ordered_json special = {{"bos_token", eot}, {"eos_token", eot}, {"unk_token", eot}};
  ordered_json vocab_json = bpe.vocab;
  vocab_json[eot] = out.ranks;
  std::string merges_txt = "#version: 0.2\n";
  for (const auto& m : bpe.merges) merges_txt += m + "\n";
  out.files = {{"tokenizer.json", tokenizer_json(bpe, out.ranks).dump(1) + "\n"},
               {"tokenizer_config.json", tokenizer_config(out.ranks, model_max_length).dump(2) + "\n"},
               {"special_tokens_map.json", special.dump(2) + "\n"},
               {"vocab.json", vocab_json.dump() + "\n"},
               {"merges.txt", merges_txt}};
  return out;
}

}  // namespace prism
