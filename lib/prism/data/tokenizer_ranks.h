#pragma once
// BpeRanks: the merge ranks of a byte-level BPE vocabulary, read from a
// tiktoken ranks file (one "base64-bytes rank" per line). Looking up a byte
// string is the inner loop of BPE, so the table is a flat open-addressing hash
// over one arena of token bytes: no allocation, one probe on average.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prism {

class BpeRanks {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Throws prism::Error naming the file and line (missing file, bad base64,
  // bad or duplicate rank, ranks not 0..n-1) with the fix `fix_hint`.
  static BpeRanks load(const std::string& path, const std::string& fix_hint);

  // Rank of exactly these bytes, or kNone.
  uint32_t find(std::string_view bytes) const {
    if (bytes.size() == 1) return byte_rank_[static_cast<unsigned char>(bytes[0])];
    uint64_t h = hash(bytes.data(), bytes.size());
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.rank == kNone) return kNone;
      if (s.tag == static_cast<uint32_t>(h >> 32) && lengths_[s.rank] == bytes.size() &&
          arena_.compare(offsets_[s.rank], bytes.size(), bytes) == 0)
        return s.rank;
    }
  }
  std::string_view bytes(uint32_t rank) const { return {arena_.data() + offsets_[rank], lengths_[rank]}; }
  size_t size() const { return offsets_.size(); }

  static uint64_t hash(const char* p, size_t n);

 private:
  struct Slot {
    uint32_t rank = kNone;
    uint32_t tag = 0;  // high hash bits: most mismatches never touch the arena
  };
  void build_index(const std::string& path, const std::string& fix_hint);

  std::string arena_;
  std::vector<uint32_t> offsets_, lengths_;  // by rank
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint32_t byte_rank_[256];
};

}  // namespace prism
