#pragma once
// Hugging Face tokenizer files for a byte-level BPE vocabulary in tiktoken's
// ranks format (GPT-2's gpt2.tiktoken, or a compact one from `prism data
// vocab`), so that transformers' AutoTokenizer encodes text as prism's
// tokenizer and tiktoken do, id for id:
//   tokenizer.json          the `tokenizers` pipeline: GPT-2's pre-tokenisation
//                           regex (Split), bytes as GPT-2's printable characters
//                           (ByteLevel), BPE with rank = id, one merge per
//                           token in rank order, and ignore_merges (a piece that
//                           is a token is that token, tiktoken's first rule);
//                           <|endoftext|> is a special token at id = ranks
//   tokenizer_config.json   PreTrainedTokenizerFast over tokenizer.json, with
//                           <|endoftext|> as bos/eos/unk and model_max_length
//   special_tokens_map.json
//   vocab.json, merges.txt  the same vocabulary as GPT-2's original files
//                           (GPT2Tokenizer reads them; for gpt2.tiktoken they
//                           hold GPT-2's 50,257 ids and 50,000 merges)
// The merge of a token of rank r is what tiktoken's BPE makes of its bytes with
// the ranks below r (tiktoken's own recipe for recovering merges): for a
// vocabulary trained by BPE, the pair it was trained from. tiktoken merges any
// adjacent pair whose join is a token, HF only listed pairs; the two agree
// whenever each token is only ever reached through that pair, which the parity
// test checks on real text (test/export).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace prism {

struct HfTokenizer {
  std::vector<std::pair<std::string, std::string>> files;  // file name, contents
  int ranks = 0;        // byte-level BPE ranks; <|endoftext|> is id `ranks`
  int merges = 0;       // merges written (ranks - 256 for a BPE-trained vocabulary)
  // Tokens no pair of lower ranks joins into (no merge; they still encode as
  // whole pieces through ignore_merges, as in tiktoken).
  int unmerged = 0;
  int vocab_size() const { return ranks + 1; }
};

// Reads the ranks file (throws prism::Error naming the file and line for a
// damaged one) and builds the files. `model_max_length`: the model's context.
HfTokenizer hf_tokenizer_files(const std::string& ranks_path, int64_t model_max_length);

// GPT-2's byte-to-character table (bytes_to_unicode in GPT-2's encoder.py):
// printable Latin-1 bytes stand for themselves, the others for U+0100 upward;
// each entry is the character's UTF-8.
const std::vector<std::string>& byte_level_alphabet();

}  // namespace prism
