// Token shards: llm.c's format both ways (Python writer -> prism reader, prism
// writer -> llm.c's Python reader), and an error naming the shard and the fix
// for every kind of damage.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "data_support.h"
#include "prism/data/shard.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;

namespace {

uint16_t formula(size_t i, uint64_t salt) { return static_cast<uint16_t>((i * 7919 + salt) % 50257); }

std::string error_of(const std::string& path) {
  try {
    TokenShard s(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string header_bytes(int32_t magic, int32_t version, int32_t count) {
  std::string h(kShardHeaderBytes, '\0');
  int32_t v[3] = {magic, version, count};
  std::memcpy(h.data(), v, sizeof v);
  return h;
}

}  // namespace

TEST_CASE("shard: a shard written by llm.c's Python writer loads unchanged", "[data]") {
  TempDir dir("prism-shard");
  std::string path = dir.file("fineweb_train_000001.bin");
  auto w = run_reference("llmc_shard.py", fmt::format("write '{}' 12345 17", path));
  INFO(w.output);
  REQUIRE(w.exit_code == 0);
  CHECK(std::filesystem::file_size(path) == kShardHeaderBytes + 2 * 12345);
  CHECK(shard_token_count(path) == 12345);
  TokenShard s(path);
  REQUIRE(s.size() == 12345);
  size_t wrong = 0;
  for (size_t i = 0; i < s.size(); ++i) wrong += s[i] != formula(i, 17);
  CHECK(wrong == 0);
}

TEST_CASE("shard: prism's writer produces what llm.c's Python reader accepts", "[data]") {
  TempDir dir("prism-shard");
  std::vector<uint16_t> toks(54321);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = formula(i, 3);
  std::string path = dir.file("x_val_000000.bin");
  write_shard(path, toks);
  uint64_t sum = 0, weighted = 0;
  for (size_t i = 0; i < toks.size(); ++i) sum += toks[i], weighted += (i + 1) * toks[i];
  auto r = run_reference("llmc_shard.py", fmt::format("read '{}'", path));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.output);
  CHECK(j["count"].get<uint64_t>() == toks.size());
  CHECK(j["sum"].get<uint64_t>() == sum);
  CHECK(j["weighted"].get<uint64_t>() == weighted);
  // Written under a temporary name and renamed: nothing else is left behind.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("shard: every kind of damage is an error naming the shard, the problem and the fix", "[data]") {
  TempDir dir("prism-shard");
  std::string tokens(2 * 100, '\x01');
  auto make = [&](const std::string& name, const std::string& bytes) {
    write_file(dir.file(name), bytes);
    return error_of(dir.file(name));
  };
  CHECK_THAT(error_of(dir.file("absent.bin")), Catch::Contains("absent.bin") && Catch::Contains("not found") &&
                                                  Catch::Contains("prism data prepare"));
  CHECK_THAT(make("magic.bin", header_bytes(12345, 1, 100) + tokens),
             Catch::Contains("magic.bin") && Catch::Contains("magic number 12345") && Catch::Contains("20240520") &&
                 Catch::Contains("Fix:"));
  CHECK_THAT(make("llama.bin", header_bytes(20240801, 7, 50) + tokens),
             Catch::Contains("llama.bin") && Catch::Contains("Llama-3"));
  CHECK_THAT(make("version.bin", header_bytes(kShardMagic, 2, 100) + tokens),
             Catch::Contains("version.bin") && Catch::Contains("version 2"));
  CHECK_THAT(make("header.bin", header_bytes(kShardMagic, 1, 100).substr(0, 500)),
             Catch::Contains("header.bin") && Catch::Contains("truncated") && Catch::Contains("500 bytes"));
  CHECK_THAT(make("short.bin", header_bytes(kShardMagic, 1, 100) + tokens.substr(0, 150)),
             Catch::Contains("short.bin") && Catch::Contains("truncated") && Catch::Contains("100 tokens") &&
                 Catch::Contains("--force"));
  CHECK_THAT(make("long.bin", header_bytes(kShardMagic, 1, 100) + tokens + "xy"),
             Catch::Contains("long.bin") && Catch::Contains("2 bytes after"));
  CHECK_THAT(make("negative.bin", header_bytes(kShardMagic, 1, -5) + tokens), Catch::Contains("token count -5"));
  CHECK(make("good.bin", header_bytes(kShardMagic, 1, 100) + tokens) == "no error");
}

TEST_CASE("shard: a failed write leaves neither the shard nor a temp file", "[data]") {
  TempDir dir("prism-shard");
  std::vector<uint16_t> toks(10, 7);
  std::string path = dir.file("missing-dir/x.bin");
  try {
    write_shard(path, toks);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("missing-dir") && Catch::Contains("Fix:"));
  }
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 0);
}
