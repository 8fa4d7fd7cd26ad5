#include "prism/data/shard.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prism/error.h"

// The format is little-endian; the tokens are used in place, without swapping.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards are read in place on little-endian hosts only");

namespace prism {

namespace {

constexpr int32_t kLlama3Magic = 20240801;  // llm.c's uint32-token shards
constexpr const char* kRemake =
    "re-create it with `prism data prepare ... --force` (or fetch the shard again if it came from elsewhere)";

Error shard_error(const std::string& path, const std::string& what, const std::string& fix = kRemake) {
  return Error(what, path, fix);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens and validates; returns the token count and leaves `fd` open.
size_t open_validated(const std::string& path, Fd& f) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    if (errno == ENOENT)
      throw shard_error(path, "token shard not found",
                        "check the path, or prepare the data with `prism data prepare` (see data/README.md)");
    throw shard_error(path, std::string("cannot open the token shard: ") + std::strerror(errno), "check its permissions");
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw shard_error(path, std::string("cannot stat: ") + std::strerror(errno), "check the file");
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kShardHeaderBytes)
    throw shard_error(path, fmt::format("truncated: {} bytes, shorter than the {}-byte shard header", bytes,
                                        kShardHeaderBytes));
  int32_t header[kShardHeaderInts];
  if (::pread(f.fd, header, kShardHeaderBytes, 0) != static_cast<ssize_t>(kShardHeaderBytes))
    throw shard_error(path, "cannot read the shard header", "check the file");
  if (header[0] == kLlama3Magic)
    throw shard_error(path, "a Llama-3 shard (magic 20240801, uint32 tokens); prism reads GPT-2 shards (magic 20240520)",
                      "use GPT-2 tokenized shards (llm.c's fineweb.py -m gpt-2, or `prism data prepare`)");
  if (header[0] != kShardMagic)
    throw shard_error(path, fmt::format("not a token shard: magic number {}, expected {} (llm.c's format)", header[0],
                                        kShardMagic),
                      "point at llm.c-format .bin shards, or make them with `prism data prepare`");
  if (header[1] != kShardVersion)
    throw shard_error(path, fmt::format("shard version {}, expected {} (uint16 GPT-2 tokens)", header[1], kShardVersion),
                      "use GPT-2 shards of version 1, or re-create them with `prism data prepare`");
  if (header[2] < 0) throw shard_error(path, fmt::format("corrupt header: token count {}", header[2]));
  const size_t count = static_cast<size_t>(header[2]);
  const size_t want = kShardHeaderBytes + count * sizeof(uint16_t);
  if (bytes < want)
    throw shard_error(path, fmt::format("truncated: the header announces {} tokens ({} bytes) but the file has {} bytes",
                                        count, want, bytes));
  if (bytes > want)
    throw shard_error(path, fmt::format("{} bytes after the {} tokens the header announces: the header or the data is "
                                        "damaged",
                                        bytes - want, count));
  return count;
}

}  // namespace

void write_shard(const std::string& path, const uint16_t* tokens, size_t count) {
  if (count > static_cast<size_t>(INT32_MAX))
    throw Error(fmt::format("{} tokens do not fit one shard (the header holds an int32 count)", count), path,
                "use smaller shards (--shard-tokens)");
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(count);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(std::string("cannot create the shard: ") + std::strerror(errno), tmp, "check the directory exists and is writable");
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1 &&
            (count == 0 || std::fwrite(tokens, sizeof(uint16_t), count, f) == count);
  ok = (std::fflush(f) == 0) && ok;
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error(std::string("cannot write the shard: ") + std::strerror(err), path,
                "free disk space (or choose another output directory) and run again");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw Error(std::string("cannot rename the finished shard into place: ") + std::strerror(err), path,
                "check the directory is writable");
  }
}

size_t shard_token_count(const std::string& path) {
  Fd f;
  return open_validated(path, f);
}

TokenShard::TokenShard(const std::string& path) : path_(path) {
  Fd f;
  count_ = open_validated(path, f);
  if (count_ == 0) return;
  map_bytes_ = kShardHeaderBytes + count_ * sizeof(uint16_t);
  void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, f.fd, 0);
  if (m == MAP_FAILED)
    throw Error(std::string("cannot map the token shard: ") + std::strerror(errno), path, "check free memory and ulimit -v");
  map_ = m;
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(m) + kShardHeaderBytes);
}

void TokenShard::release() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  tokens_ = nullptr;
  map_bytes_ = count_ = 0;
}

TokenShard::~TokenShard() { release(); }

TokenShard::TokenShard(TokenShard&& o) noexcept { *this = std::move(o); }

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    tokens_ = o.tokens_;
    count_ = o.count_;
    o.map_ = nullptr;
    o.tokens_ = nullptr;
    o.map_bytes_ = o.count_ = 0;
  }
  return *this;
}

}  // namespace prism
