#include "prism/data/bpe_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <queue>

#include "prism/atomic_file.h"
#include "prism/data/pretokenize.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

namespace prism {

namespace {

using Pair = uint64_t;  // (left id << 32) | right id
Pair pair_of(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
uint32_t left_of(Pair p) { return static_cast<uint32_t>(p >> 32); }
uint32_t right_of(Pair p) { return static_cast<uint32_t>(p); }

// A distinct piece as a sequence of token ids, and how often it occurs.
struct Word {
  std::vector<uint32_t> symbols;
  uint64_t count;
};

// The heap orders pairs by count, then the lower pair first; an entry is stale
// when its count no longer matches the table (it was pushed again on change).
struct Candidate {
  uint64_t count;
  Pair pair;
  bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

class Trainer {
 public:
  Trainer(const PieceCounts& counts, int target_ranks) : target_(static_cast<size_t>(target_ranks)) {
    for (int b = 0; b < 256; ++b) add_token(std::string(1, static_cast<char>(b)));
    // Pieces in a fixed order (the count table's order depends on the library): by bytes.
    std::vector<const std::pair<const std::string, uint64_t>*> pieces;
    pieces.reserve(counts.counts().size());
    for (const auto& kv : counts.counts()) pieces.push_back(&kv);
    std::sort(pieces.begin(), pieces.end(), [](auto* x, auto* y) { return x->first < y->first; });
    words_.reserve(pieces.size());
    for (const auto* kv : pieces) {
      if (kv->first.size() < 2) continue;  // a single byte has no pair to merge
      Word w{{}, kv->second};
      for (unsigned char c : kv->first) w.symbols.push_back(c);
      words_.push_back(std::move(w));
    }
    stamp_.assign(words_.size(), 0);
    for (uint32_t i = 0; i < words_.size(); ++i) count_pairs(i, +1);
    for (const auto& [p, c] : pair_count_)
      if (c > 0) heap_.push({static_cast<uint64_t>(c), p});
  }

  // Merges until the target or until no pair occurs twice; returns the tokens by id.
  std::vector<std::string> run(const std::function<void(int, int)>& progress) {
    size_t reported = tokens_.size();
    while (tokens_.size() < target_) {
      const auto best = pop_best();
      if (!best || best->count < 2) break;
      merge(best->pair);
      if (progress && tokens_.size() >= reported + 256) {
        reported = tokens_.size();
        progress(static_cast<int>(tokens_.size()), static_cast<int>(target_));
      }
    }
    if (progress) progress(static_cast<int>(tokens_.size()), static_cast<int>(target_));
    return std::move(tokens_);
  }

 private:
  uint32_t add_token(std::string bytes) {
    const auto id = static_cast<uint32_t>(tokens_.size());
    id_of_.emplace(bytes, id);
    tokens_.push_back(std::move(bytes));
    return id;
  }

  // Adds (sign +1) or removes (-1) word w's adjacent pairs from the table.
  void count_pairs(uint32_t w, int sign) {
    const Word& word = words_[w];
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
      const Pair p = pair_of(word.symbols[i], word.symbols[i + 1]);
      pair_count_[p] += sign * static_cast<int64_t>(word.count);
      if (sign > 0) {
        auto& ws = where_[p];
        if (ws.empty() || ws.back() != w) ws.push_back(w);
      }
      touched_.push_back(p);
    }
  }

  std::optional<Candidate> pop_best() {
    while (!heap_.empty()) {
      const Candidate c = heap_.top();
      heap_.pop();
      const auto it = pair_count_.find(c.pair);
      if (it != pair_count_.end() && it->second > 0 && static_cast<uint64_t>(it->second) == c.count) return c;
    }
    return std::nullopt;
  }

  void merge(Pair pair) {
    const uint32_t a = left_of(pair), b = right_of(pair);
    std::string bytes = tokens_[a] + tokens_[b];
    // Another merge order may already have made these bytes: then the pair merges into that token.
    const auto known = id_of_.find(bytes);
    const uint32_t merged = known != id_of_.end() ? known->second : add_token(std::move(bytes));
    ++stamp_now_;
    touched_.clear();
    const std::vector<uint32_t> words = std::move(where_[pair]);
    where_.erase(pair);
    for (uint32_t w : words) {
      if (stamp_[w] == stamp_now_) continue;
      stamp_[w] = stamp_now_;
      auto& s = words_[w].symbols;
      bool has = false;
      for (size_t i = 0; i + 1 < s.size() && !has; ++i) has = s[i] == a && s[i + 1] == b;
      if (!has) continue;  // a stale entry: an earlier merge took the pair out of this word
      count_pairs(w, -1);
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++out) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          s[out] = merged;
          i += 2;
        } else {
          s[out] = s[i++];
        }
      }
      s.resize(out);
      count_pairs(w, +1);
    }
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (Pair p : touched_) {
      auto it = pair_count_.find(p);
      if (it == pair_count_.end()) continue;
      if (it->second <= 0) pair_count_.erase(it);
      else heap_.push({static_cast<uint64_t>(it->second), p});
    }
  }

  size_t target_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, uint32_t> id_of_;
  std::vector<Word> words_;
  std::unordered_map<Pair, int64_t> pair_count_;
  std::unordered_map<Pair, std::vector<uint32_t>> where_;  // words holding the pair (entries may be stale)
  std::priority_queue<Candidate> heap_;
  std::vector<uint32_t> stamp_;
  uint32_t stamp_now_ = 0;
  std::vector<Pair> touched_;
};

std::string base64(std::string_view in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += k[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < in.size() ? k[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace

void PieceCounts::add_text(std::string_view text) {
  const size_t bad = utf8_error_offset(text);
  if (bad != std::string_view::npos)
    throw Error(fmt::format("text is not valid UTF-8 at byte {}", bad), "BPE training input",
                "convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
  static const Pretokenizer pieces;
  pieces.for_each_piece(text, [&](std::string_view p) {
    ++counts_[std::string(p)];
    ++pieces_;
  });
  bytes_ += text.size();
}

void PieceCounts::merge(const PieceCounts& other) {
  for (const auto& [piece, n] : other.counts_) counts_[piece] += n;
  pieces_ += other.pieces_;
  bytes_ += other.bytes_;
}

BpeVocabulary train_bpe(const PieceCounts& counts, const BpeTrainOptions& o) {
  if (o.vocab_size < 257 + 1 || o.vocab_size > 65536)
    throw Error(fmt::format("a vocabulary of {} ids", o.vocab_size), "BPE training",
                "ask for 258 to 65536 ids (256 single bytes, at least one merge, and end-of-text)");
  const int target = o.vocab_size - 1;
  Trainer t(counts, target);
  BpeVocabulary v{t.run(o.progress)};
  if (static_cast<int>(v.tokens.size()) < target)
    throw Error(fmt::format("the text ({} distinct pieces, {} bytes) has pairs that occur at least twice for only {} "
                            "ranks; {} ids were asked for",
                            counts.counts().size(), counts.bytes(), v.tokens.size(), o.vocab_size),
                "BPE training", fmt::format("ask for at most {} ids, or give more text", v.tokens.size() + 1));
  return v;
}

void write_tiktoken_ranks(const std::string& path, const BpeVocabulary& vocab) {
  std::string text;
  for (size_t r = 0; r < vocab.tokens.size(); ++r) text += base64(vocab.tokens[r]) + " " + std::to_string(r) + "\n";
  write_file_atomic(path, text);
}

}  // namespace prism
