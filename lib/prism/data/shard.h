#pragma once
// Token shards in llm.c's format, so FineWeb shards made by llm.c load
// unchanged: a header of 256 little-endian int32 (magic 20240520, version 1,
// token count, the rest zero), then the tokens as little-endian uint16.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace prism {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr size_t kShardHeaderInts = 256;
constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// Writes a shard to a temporary name beside `path` and renames it into place,
// so a reader never sees a half-written shard. Throws prism::Error (disk full, ...).
void write_shard(const std::string& path, const uint16_t* tokens, size_t count);
inline void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_shard(path, tokens.data(), tokens.size());
}

// The token count a shard's header announces, after checking the header and
// that the file size agrees with it. Throws prism::Error naming the shard,
// what is wrong and how to fix it.
size_t shard_token_count(const std::string& path);

// A validated shard, memory-mapped read-only (pages load on first touch, so
// opening a hundred FineWeb shards costs nothing up front).
class TokenShard {
 public:
  explicit TokenShard(const std::string& path);  // throws prism::Error, as shard_token_count
  ~TokenShard();
  TokenShard(TokenShard&& o) noexcept;
  TokenShard& operator=(TokenShard&& o) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const uint16_t* tokens() const { return tokens_; }
  size_t size() const { return count_; }
  uint16_t operator[](size_t i) const { return tokens_[i]; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  size_t count_ = 0;
};

}  // namespace prism
