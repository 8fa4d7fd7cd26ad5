// The fused kernel's code path for bf16 inputs (attention_fused.h, fused_code_path):
// AVX512-BF16 pair dot products only where they beat avx512's fp32 arithmetic here,
// measured once per machine and cached, so every process (a resumed run too) takes
// the same path; the cache decides, PRISM_CPU_ISA overrides, fp32 is untouched.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "prism/ops/attention_fused.h"
#include "prism/ops/cpu_code_paths.h"
#include "support.h"
#include "test_paths.h"

using namespace prism;
using namespace prism::test;

namespace {

// prism bench attention on one small bf16 case, with this cache directory (and environment).
Process bench(const TempDir& cache, const std::string& env = "") {
  return run(fmt::format("PRISM_CACHE_DIR='{}' {} '{}' bench attention --T 64 --head-dim 64 --width 128 --tokens 64 "
                         "--dtype bf16 --backends sdpa,fused --repeat 1 --threads 1",
                         cache.path(), env, PRISM_BINARY));
}

void set_ratio(const std::string& file, double ratio) {
  auto j = nlohmann::json::parse(read_file(file));
  REQUIRE(j.size() == 1);
  j.begin().value()["ratio"] = ratio;
  write_file(file, j.dump());
}

}  // namespace

TEST_CASE("fused kernel, bf16 inputs: the code path is measured once per machine, cached, and the cache decides",
          "[ops][attention][bf16]") {
  CHECK(attention::fused_code_path(torch::kFloat).name == attention::default_cpu_code_path().name);
  if (attention::default_cpu_code_path().name != "avx512_bf16") {
    // Without AVX512-BF16 there is nothing to choose: bf16 takes the default path, unmeasured.
    CHECK(attention::fused_code_path(torch::kBFloat16).name == attention::default_cpu_code_path().name);
    WARN("SKIPPED (in part): this CPU has no AVX512-BF16 code path to measure against avx512");
    return;
  }
  TempDir cache("prism-bf16-path");
  const std::string file = cache.file("cpu-attention.json");
  auto first = bench(cache);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.output, Catch::Contains("fused kernel, bf16 inputs: code path ") &&
                               Catch::Contains("[measured now, cached in " + file + "]"));
  auto j = nlohmann::json::parse(read_file(file));
  REQUIRE(j.size() == 1);
  const double ratio = j.begin().value()["ratio"].get<double>();
  CHECK(ratio > 0);
  CHECK_THAT(first.output, Catch::Contains(ratio > 1.0 ? "code path avx512 (AVX512-BF16" : "code path avx512_bf16 (AVX512-BF16"));
  // The cache decides, read again by every process.
  set_ratio(file, 0.5);
  auto fast = bench(cache);
  INFO(fast.output);
  CHECK_THAT(fast.output, Catch::Contains("bf16 inputs: code path avx512_bf16 (AVX512-BF16 pair dot products took 0.50x") &&
                              Catch::Contains("[measured before, cached in " + file + "]"));
  set_ratio(file, 2.0);
  auto slow = bench(cache);
  INFO(slow.output);
  CHECK_THAT(slow.output, Catch::Contains("bf16 inputs: code path avx512 (AVX512-BF16 pair dot products took 2.00x"));
  CHECK_THAT(slow.output, Catch::Contains("fused") && Catch::Contains("ok vs sdpa"));
  // PRISM_CPU_ISA is obeyed as it is: no measurement, no bf16 line.
  auto forced = bench(cache, "PRISM_CPU_ISA=avx512_bf16");
  INFO(forced.output);
  CHECK_THAT(forced.output, Catch::Contains("fused kernel: code path avx512_bf16"));
  CHECK_THAT(forced.output, !Catch::Contains("bf16 inputs: code path"));
}
