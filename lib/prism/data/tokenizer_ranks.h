#pragma once
// BpeRanks: the merge ranks of a byte-level BPE vocabulary, read from a
// tiktoken ranks file (one "base64-bytes rank" per line). Looking up a byte
// string is the inner loop of BPE, so the table is a flat open-addressing hash
// over one arena of token bytes: no allocation, one probe on average.
#include <cstdint>
#include <cstring>
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
    const size_t n = bytes.size();
    if (n == 1) return byte_rank_[static_cast<unsigned char>(bytes[0])];
    const uint64_t head = prefix(bytes.data(), n);
    for (size_t i = hash(bytes.data(), n) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.rank == kNone) return kNone;
      if (s.head == head && s.length == n &&
          (n <= 8 || std::memcmp(arena_.data() + offsets_[s.rank] + 8, bytes.data() + 8, n - 8) == 0))
        return s.rank;
    }
  }
  std::string_view bytes(uint32_t rank) const { return {arena_.data() + offsets_[rank], lengths_[rank]}; }
  size_t size() const { return offsets_.size(); }

  static uint64_t hash(const char* p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xc2b2ae3d27d4eb4fULL);
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xff51afd7ed558ccdULL;
      h ^= h >> 31;
    }
    if (n) h = (h ^ prefix(p, n)) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
  }
  // The first min(n, 8) bytes as a little-endian integer, zero-padded.
  static uint64_t prefix(const char* p, size_t n) {
    // Two overlapping loads instead of a byte loop: fewer branches for the short keys that dominate.
    if (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      return w;
    }
    if (n >= 4) {
      uint32_t lo, hi;
      std::memcpy(&lo, p, 4);
      std::memcpy(&hi, p + n - 4, 4);
      return uint64_t(lo) | (uint64_t(hi) << (8 * (n - 4)));
    }
    if (n >= 2) {
      uint16_t lo, hi;
      std::memcpy(&lo, p, 2);
      std::memcpy(&hi, p + n - 2, 2);
      return uint64_t(lo) | (uint64_t(hi) << (8 * (n - 2)));
    }
    return n ? uint64_t(static_cast<unsigned char>(p[0])) : 0;
  }

 private:
  // A slot holds the first 8 bytes of its token, so most lookups (tokens are
  // short) are decided without touching the arena: one cache line per probe.
  struct Slot {
    uint64_t head = 0;
    uint32_t rank = kNone;
    uint32_t length = 0;
  };
  void build_index(const std::string& path, const std::string& fix_hint);

  std::string arena_;
  std::vector<uint32_t> offsets_, lengths_;  // by rank
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint32_t byte_rank_[256];
};

}  // namespace prism
