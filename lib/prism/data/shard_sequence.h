#pragma once
// The token stream of a corpus cut into llm.c's shards, in a directory: the
// validation shard (<name>_val_000000.bin, val_tokens tokens) first, then
// training shards (<name>_train_000001.bin, ...) of shard_tokens tokens, the last
// one holding the rest. Counts token frequencies per shard kind for the unigram
// baseline. A sequence can continue from a PrepareState (a resumed preparation).
#include <cstdint>
#include <string>
#include <vector>

#include "prism/data/prepare_state.h"

namespace prism {

class ShardSequence {
 public:
  ShardSequence(std::string dir, std::string name, uint64_t val_tokens, uint64_t shard_tokens, int vocab_size);

  // Continues after the shards of `state`, counting their tokens' frequencies again.
  void restore(const PrepareState& state);
  // Appends one token; true when it completed a shard (then written).
  bool add(uint16_t token) {
    buf_.push_back(token);
    ++frequency_[files_.empty() ? 0 : 1][token];
    if (buf_.size() < capacity()) return false;
    flush();
    return true;
  }
  void finish();  // writes the last, partial shard

  uint64_t tokens() const { return written_ + buf_.size(); }
  const std::vector<std::string>& files() const { return files_; }  // paths, val first
  const std::vector<uint64_t>& counts() const { return counts_; }
  // Copies the shard list into `state` (for PrepareStage::save).
  void record(PrepareState& state) const;

  // Cross-entropy (nats per token) of the validation tokens under the training tokens'
  // frequencies, add-1/2 (Krichevsky-Trofimov) smoothed so that a token unseen in
  // training costs a finite amount. NaN without validation tokens.
  double unigram_val_loss() const;

 private:
  uint64_t capacity() const { return files_.empty() ? val_ : train_; }
  void flush();
  std::string dir_, name_;
  uint64_t val_, train_, written_ = 0;
  std::vector<uint16_t> buf_;
  std::vector<std::string> files_;
  std::vector<uint64_t> counts_;
  std::vector<uint64_t> frequency_[2];  // [0] the validation shard, [1] the training shards
};

}  // namespace prism
