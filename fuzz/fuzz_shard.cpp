// The token-shard reader (llm.c's format): shard_token_count and TokenShard on
// arbitrary file contents. A shard that opens must be readable to its last
// token, agree with its header, and survive a write_shard round trip.
#include <cstring>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "prism/data/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  const std::string path = scratch.write("fuzz_train_000001.bin", std::string_view(reinterpret_cast<const char*>(data), size));
  prism::fuzz::expect_clean([&] {
    const size_t count = prism::shard_token_count(path);
    prism::TokenShard shard(path);
    if (shard.size() != count) prism::fuzz::finding("TokenShard and shard_token_count disagree on the token count");
    if (prism::kShardHeaderBytes + 2 * count != size) prism::fuzz::finding("a shard opened whose size disagrees with its header");
    std::vector<uint16_t> tokens(shard.tokens(), shard.tokens() + shard.size());  // touches every mapped token
    if (count > 0 && std::memcmp(tokens.data(), data + prism::kShardHeaderBytes, 2 * count) != 0)
      prism::fuzz::finding("the tokens read differ from the file's bytes");
    const std::string copy = scratch.dir() + "/copy_000001.bin";
    prism::write_shard(copy, tokens);
    prism::TokenShard again(copy);
    if (again.size() != count || (count > 0 && std::memcmp(again.tokens(), tokens.data(), 2 * count) != 0))
      prism::fuzz::finding("write_shard then TokenShard does not give the tokens back");
  });
  return 0;
}
