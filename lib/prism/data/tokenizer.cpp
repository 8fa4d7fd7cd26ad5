#include "prism/data/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <queue>

#include "prism/data/pretokenize.h"
#include "prism/data/tokenizer_ranks.h"
#include "prism/error.h"

namespace prism {

namespace {

constexpr const char* kVocabFix =
    "run data/get-vocab.sh (it puts gpt2.tiktoken in data/cache/), give another vocabulary's path (--vocab, "
    "$PRISM_VOCAB), or train one (prism data vocab)";

// Tokens of pieces that needed merging; words recur, so most merges are done
// once. Open addressing over flat arrays: a hit costs about one rank lookup.
class PieceCache {
 public:
  static constexpr size_t kMaxEntries = 1 << 17;  // then it starts over: bounded, refills with frequent pieces
  static constexpr size_t kMaxPiece = 256;

  bool append(std::string_view piece, std::vector<TokenId>& out) const {
    if (slots_.empty()) return false;
    const uint64_t h = BpeRanks::hash(piece.data(), piece.size()) | 1;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.hash == 0) return false;
      if (s.hash == h && s.key_len == piece.size() && std::memcmp(keys_.data() + s.key_at, piece.data(), piece.size()) == 0) {
        out.insert(out.end(), tokens_.begin() + s.tok_at, tokens_.begin() + s.tok_at + s.tok_len);
        return true;
      }
    }
  }
  void put(std::string_view piece, const TokenId* b, const TokenId* e) {
    if (piece.size() > kMaxPiece) return;
    if (entries_ >= kMaxEntries) clear();
    if (2 * (entries_ + 1) > slots_.size()) grow();
    Slot s{BpeRanks::hash(piece.data(), piece.size()) | 1, static_cast<uint32_t>(keys_.size()),
           static_cast<uint32_t>(piece.size()), static_cast<uint32_t>(tokens_.size()), static_cast<uint32_t>(e - b)};
    keys_.append(piece);
    tokens_.insert(tokens_.end(), b, e);
    insert(s);
    ++entries_;
  }
  void clear() {
    slots_.clear();
    keys_.clear();
    tokens_.clear();
    entries_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;  // 0: empty (stored hashes have the low bit set)
    uint32_t key_at = 0, key_len = 0, tok_at = 0, tok_len = 0;
  };
  void insert(const Slot& s) {
    size_t i = s.hash & mask_;
    while (slots_[i].hash != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(1024, old.size() * 2), Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.hash) insert(s);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, entries_ = 0;
  std::string keys_;
  std::vector<TokenId> tokens_;
};

struct Part {
  uint32_t start;
  uint32_t rank;  // rank of the bytes of this part joined with the next one
};

// tiktoken's merge rule: repeatedly merge the adjacent pair of lowest rank
// (leftmost on ties) until no pair is in the vocabulary. Linear scan per merge;
// fine for the short pieces that are nearly all of real text.
void merge_short(const BpeRanks& ranks, std::string_view piece, std::vector<Part>& parts, std::vector<TokenId>& out) {
  const uint32_t n = static_cast<uint32_t>(piece.size());
  auto pair_rank = [&](size_t i) {  // rank of parts i and i+1 together
    if (i + 2 >= parts.size()) return BpeRanks::kNone;
    return ranks.find(piece.substr(parts[i].start, parts[i + 2].start - parts[i].start));
  };
  parts.clear();
  for (uint32_t i = 0; i <= n; ++i) parts.push_back({i, BpeRanks::kNone});
  for (size_t i = 0; i + 1 < n; ++i) parts[i].rank = ranks.find(piece.substr(i, 2));
  while (parts.size() > 2) {
    uint32_t best = BpeRanks::kNone;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i)
      if (parts[i].rank < best) best = parts[i].rank, at = i;
    if (best == BpeRanks::kNone) break;
    parts.erase(parts.begin() + at + 1);
    parts[at].rank = pair_rank(at);
    if (at > 0) parts[at - 1].rank = pair_rank(at - 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    out.push_back(ranks.find(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start)));
}

// The same rule with a heap and a linked list: O(n log n) for long pieces (runs
// of spaces, digits or symbols), where the linear scan would be quadratic.
void merge_long(const BpeRanks& ranks, std::string_view piece, std::vector<TokenId>& out) {
  const uint32_t n = static_cast<uint32_t>(piece.size());
  std::vector<uint32_t> next(n + 1), prev(n + 1), rank(n + 1, BpeRanks::kNone);  // nodes are part starts
  for (uint32_t i = 0; i <= n; ++i) next[i] = i + 1, prev[i] = i ? i - 1 : 0;
  auto pair_rank = [&](uint32_t i) {
    if (i >= n || next[i] >= n) return BpeRanks::kNone;
    return ranks.find(piece.substr(i, next[next[i]] - i));
  };
  using Entry = std::pair<uint32_t, uint32_t>;  // (rank, start): smallest rank, then leftmost
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (uint32_t i = 0; i + 1 < n; ++i) {
    rank[i] = pair_rank(i);
    if (rank[i] != BpeRanks::kNone) heap.push({rank[i], i});
  }
  std::vector<bool> dead(n + 1, false);
  while (!heap.empty()) {
    auto [r, i] = heap.top();
    heap.pop();
    if (dead[i] || rank[i] != r) continue;  // stale entry
    uint32_t j = next[i];
    dead[j] = true;
    next[i] = next[j];
    prev[next[j]] = i;
    rank[i] = pair_rank(i);
    if (rank[i] != BpeRanks::kNone) heap.push({rank[i], i});
    if (i > 0) {
      uint32_t p = prev[i];
      rank[p] = pair_rank(p);
      if (rank[p] != BpeRanks::kNone) heap.push({rank[p], p});
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) out.push_back(ranks.find(piece.substr(i, next[i] - i)));
}

}  // namespace

size_t utf8_error_offset(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    if (i + 8 <= n) {  // skip ASCII eight bytes at a time
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

struct Gpt2Tokenizer::Impl {
  BpeRanks ranks;
  Pretokenizer pieces;
  uint64_t id = 0;
  std::string path;

  // The piece cache of the calling thread, emptied when it moves to another tokenizer.
  struct Scratch {
    uint64_t owner = 0;
    std::vector<Part> parts;
    PieceCache cache;
  };

  Scratch& scratch() const {
    thread_local Scratch s;
    if (s.owner != id) {
      s.cache.clear();
      s.owner = id;
    }
    return s;
  }

  void encode_piece(std::string_view piece, Scratch& s, std::vector<TokenId>& out) const {
    uint32_t whole = ranks.find(piece);
    if (whole != BpeRanks::kNone) {
      out.push_back(whole);
      return;
    }
    if (s.cache.append(piece, out)) return;
    size_t before = out.size();
    if (piece.size() <= 128) merge_short(ranks, piece, s.parts, out);
    else merge_long(ranks, piece, out);
    s.cache.put(piece, out.data() + before, out.data() + out.size());
  }

  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const {
    size_t bad = utf8_error_offset(text);
    if (bad != std::string_view::npos)
      throw Error(fmt::format("text is not valid UTF-8 at byte {}", bad), "tokenizer input",
                  "convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
    Scratch& s = scratch();
    pieces.for_each_piece(text, [&](std::string_view piece) { encode_piece(piece, s, out); });
  }
};

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_path) : impl_(std::make_unique<Impl>()) {
  static std::atomic<uint64_t> next_id{1};
  impl_->id = next_id++;
  impl_->path = vocab_path;
  impl_->ranks = BpeRanks::load(vocab_path, kVocabFix);
  // Token ids are stored as uint16 in shards: EOT (= the number of ranks) must fit.
  if (impl_->ranks.size() > 65535)
    throw Error(fmt::format("{} ranks: with EOT that is more ids than a uint16 token shard holds (65536)",
                            impl_->ranks.size()),
                vocab_path, "use a vocabulary of at most 65535 ranks");
}

Gpt2Tokenizer::~Gpt2Tokenizer() = default;
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;

std::vector<TokenId> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 16);
  impl_->encode_ordinary(text, out);
  return out;
}

void Gpt2Tokenizer::encode(std::string_view text, std::vector<TokenId>& out) const {
  impl_->encode_ordinary(text, out);
}

std::vector<TokenId> Gpt2Tokenizer::encode_with_special(std::string_view text) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 16);
  const std::string_view eot = kEndOfTextText;
  for (size_t from = 0;;) {
    size_t at = text.find(eot, from);
    impl_->encode_ordinary(text.substr(from, at == std::string_view::npos ? at : at - from), out);
    if (at == std::string_view::npos) break;
    out.push_back(this->eot());
    from = at + eot.size();
  }
  return out;
}

std::string_view Gpt2Tokenizer::token_bytes(TokenId id) const {
  if (id == eot()) return kEndOfTextText;
  if (id >= impl_->ranks.size())
    throw Error(fmt::format("token id {} is outside the vocabulary (0..{})", id, eot()), "decode " + impl_->path,
                "the ids do not come from this vocabulary (check the shard, the model's vocab_size and --vocab)");
  return impl_->ranks.bytes(id);
}

TokenId Gpt2Tokenizer::eot() const { return static_cast<TokenId>(impl_->ranks.size()); }
int Gpt2Tokenizer::vocab_size() const { return static_cast<int>(impl_->ranks.size()) + 1; }

std::string Gpt2Tokenizer::decode(const std::vector<TokenId>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (TokenId id : ids) out += token_bytes(id);
  return out;
}

const std::string& Gpt2Tokenizer::path() const { return impl_->path; }

std::string default_vocab_path() {
  if (const char* env = std::getenv("PRISM_VOCAB"); env && *env) return env;
  return "data/cache/gpt2.tiktoken";
}

}  // namespace prism
