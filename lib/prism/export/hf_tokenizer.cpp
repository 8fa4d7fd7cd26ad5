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
  HfTokenizer out;
  out.ranks = static_cast<int>(ranks.size());
  const std::string eot = Gpt2Tokenizer::kEndOfTextText;

  ordered_json vocab = ordered_json::object();
  std::string merges_txt = "#version: 0.2\n";
  ordered_json merges = ordered_json::array();
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    const std::string_view token = ranks.bytes(r);
    vocab[byte_level(token)] = r;
    if (token.size() < 2) continue;
    const auto parts = bpe_parts(ranks, token, r);
    if (parts.size() != 3) {  // no pair of lower ranks joins into this token
      ++out.unmerged;
      continue;
    }
    const std::string merge = byte_level(token.substr(0, parts[1])) + " " + byte_level(token.substr(parts[1]));
    merges.push_back(merge);
    merges_txt += merge + "\n";
  }
  out.merges = static_cast<int>(merges.size());

  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", ordered_json::array({special_token(out.ranks)})},
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
        {"vocab", vocab},
        {"merges", merges}}}};

  ordered_json added_decoder = {{std::to_string(out.ranks), special_token(out.ranks)}};
  added_decoder[std::to_string(out.ranks)].erase("id");
  const ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                               {"bos_token", eot},
                               {"eos_token", eot},
                               {"unk_token", eot},
                               {"add_bos_token", false},
                               {"add_prefix_space", false},
                               {"clean_up_tokenization_spaces", false},
                               {"model_max_length", model_max_length},
                               {"added_tokens_decoder", added_decoder}};
  const ordered_json special = {{"bos_token", eot}, {"eos_token", eot}, {"unk_token", eot}};
  ordered_json vocab_json = vocab;
  vocab_json[eot] = out.ranks;

  out.files = {{"tokenizer.json", tokenizer.dump(1) + "\n"},
               {"tokenizer_config.json", config.dump(2) + "\n"},
               {"special_tokens_map.json", special.dump(2) + "\n"},
               {"vocab.json", vocab_json.dump() + "\n"},
               {"merges.txt", merges_txt}};
  return out;
}

}  // namespace prism
