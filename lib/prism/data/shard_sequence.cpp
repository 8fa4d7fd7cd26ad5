#include "prism/data/shard_sequence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "prism/data/shard.h"
#include "prism/error.h"

namespace prism {

namespace fs = std::filesystem;

ShardSequence::ShardSequence(std::string dir, std::string name, uint64_t val_tokens, uint64_t shard_tokens, int vocab_size)
    : dir_(std::move(dir)), name_(std::move(name)), val_(val_tokens), train_(shard_tokens),
      frequency_{std::vector<uint64_t>(static_cast<size_t>(vocab_size)), std::vector<uint64_t>(static_cast<size_t>(vocab_size))} {
  buf_.reserve(std::min<uint64_t>(std::max(val_, train_), 1u << 24));
}

void ShardSequence::restore(const PrepareState& state) {
  files_.clear();
  for (const auto& s : state.shards) files_.push_back((fs::path(dir_) / s).string());
  counts_ = state.shard_tokens;
  written_ = 0;
  for (uint64_t c : counts_) written_ += c;
  for (auto& f : frequency_) std::fill(f.begin(), f.end(), 0);
  for (size_t i = 0; i < files_.size(); ++i) {
    const TokenShard shard(files_[i]);
    auto& frequency = frequency_[i == 0 ? 0 : 1];
    for (size_t k = 0; k < shard.size(); ++k) {
      if (shard[k] >= frequency.size())
        throw Error(fmt::format("token {} is outside the vocabulary", shard[k]), files_[i],
                    "delete this directory and prepare again");
      ++frequency[shard[k]];
    }
  }
  buf_.clear();
}

void ShardSequence::flush() {
  const size_t index = files_.size();
  const std::string file = (fs::path(dir_) / fmt::format("{}_{}_{:06d}.bin", name_, index == 0 ? "val" : "train", index)).string();
  write_shard(file, buf_);
  files_.push_back(file);
  counts_.push_back(buf_.size());
  written_ += buf_.size();
  buf_.clear();
}

void ShardSequence::finish() {
  if (!buf_.empty()) flush();
}

void ShardSequence::record(PrepareState& state) const {
  state.shards.clear();
  for (const auto& f : files_) state.shards.push_back(fs::path(f).filename().string());
  state.shard_tokens = counts_;
}

double ShardSequence::unigram_val_loss() const {
  const auto& val = frequency_[0];
  const auto& train = frequency_[1];
  double n_train = 0, n_val = 0, sum = 0;
  for (size_t v = 0; v < train.size(); ++v) n_train += static_cast<double>(train[v]);
  const double denominator = n_train + 0.5 * static_cast<double>(train.size());
  for (size_t v = 0; v < val.size(); ++v) {
    if (val[v] == 0) continue;
    n_val += static_cast<double>(val[v]);
    sum -= static_cast<double>(val[v]) * std::log((static_cast<double>(train[v]) + 0.5) / denominator);
  }
  return n_val > 0 ? sum / n_val : std::nan("");
}

}  // namespace prism
