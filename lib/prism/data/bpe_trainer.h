#pragma once
// Training a compact byte-level BPE vocabulary on a corpus, in the tiktoken
// ranks format the tokenizer reads (tokenizer.h): GPT-2's pre-tokenisation cuts
// the text into pieces (pretokenize.h); ranks 0..255 are the single bytes in
// byte order; each further rank is the merge of the adjacent pair of tokens that
// occurs most often inside the pieces, weighted by how often each piece occurs
// (ties: the pair of lower token ids first), until vocab_size - 1 ranks exist.
// The end-of-text token takes the next id, so a vocabulary of N ids holds N - 1
// ranks. Training is deterministic: the same text gives the same file.
//
// Counting is incremental (each merge touches only the distinct pieces that
// contain its pair), so a few MB of text train 8k ids in about a second.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace prism {

// How often each distinct piece occurs in the text seen so far.
class PieceCounts {
 public:
  // Cuts `text` (valid UTF-8, else prism::Error) with GPT-2's pre-tokenisation and counts its pieces.
  void add_text(std::string_view text);
  // Adds another count table (for counting on several threads).
  void merge(const PieceCounts& other);
  const std::unordered_map<std::string, uint64_t>& counts() const { return counts_; }
  uint64_t pieces() const { return pieces_; }  // pieces counted, with repeats
  uint64_t bytes() const { return bytes_; }

 private:
  std::unordered_map<std::string, uint64_t> counts_;
  uint64_t pieces_ = 0, bytes_ = 0;
};

struct BpeTrainOptions {
  int vocab_size = 4096;  // ids including end-of-text: the result has vocab_size - 1 ranks (256 <= ranks <= 65535)
  // Called now and then with (ranks made, ranks wanted).
  std::function<void(int, int)> progress;
};

struct BpeVocabulary {
  std::vector<std::string> tokens;  // the bytes of each rank
  int vocab_size() const { return static_cast<int>(tokens.size()) + 1; }  // with end-of-text
};

// Trains the ranks. Throws prism::Error when vocab_size is out of range, or when
// the text has too few repeated pairs to make that many ranks (the message says
// how many it could make).
BpeVocabulary train_bpe(const PieceCounts& counts, const BpeTrainOptions& options);

// Writes the ranks in tiktoken's format ("base64-bytes rank" lines), through a
// temporary file renamed into place. Throws prism::Error when it cannot write.
void write_tiktoken_ranks(const std::string& path, const BpeVocabulary& vocab);

}  // namespace prism
