// The fused kernel's code path for bf16 inputs (attention_fused.h, fused_code_path):
// the fastest of the bf16 paths this CPU runs (amx, avx512_bf16, avx512), measured
// once per machine and cached, so every process (a resumed run too) takes the same
// path; the cache decides, PRISM_CPU_ISA overrides, fp32 is untouched.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

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

// Rewrites the cached seconds of every code path: `fastest` gets 1 ms, the others 2 ms.
void make_fastest(const std::string& file, const std::string& fastest) {
  auto j = nlohmann::json::parse(read_file(file));
  REQUIRE(j.size() == 1);
  auto& seconds = j.begin().value()["seconds"];
  REQUIRE(seconds.contains(fastest));
  for (auto& [name, t] : seconds.items()) t = name == fastest ? 1e-3 : 2e-3;
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
  const auto seconds = j.begin().value()["seconds"];
  // Every bf16 path this CPU runs was timed; the fastest was taken.
  std::vector<std::string> paths{"avx512_bf16", "avx512"};
  for (const auto& p : attention::cpu_code_paths())
    if (p.name == "amx" && p.supported) paths.insert(paths.begin(), "amx");
  REQUIRE(seconds.size() == paths.size());
  std::string fastest;
  for (const auto& name : paths) {
    REQUIRE(seconds.contains(name));
    CHECK(seconds[name].get<double>() > 0);
    if (fastest.empty() || seconds[name].get<double>() < seconds[fastest].get<double>()) fastest = name;
  }
  CHECK_THAT(first.output, Catch::Contains("code path " + fastest + " (a 512-token forward + backward took"));
  // The cache decides, read again by every process, whichever path it names fastest.
  for (const auto& name : paths) {
    make_fastest(file, name);
    auto again = bench(cache);
    INFO(again.output);
    CHECK_THAT(again.output, Catch::Contains("bf16 inputs: code path " + name + " (a 512-token forward + backward took") &&
                                 Catch::Contains(name + " 1.00 ms") &&
                                 Catch::Contains("[measured before, cached in " + file + "]"));
    CHECK_THAT(again.output, Catch::Contains("fused") && Catch::Contains("ok vs sdpa"));
  }
  // PRISM_CPU_ISA is obeyed as it is: no measurement, no bf16 line.
  auto forced = bench(cache, "PRISM_CPU_ISA=avx512_bf16");
  INFO(forced.output);
  CHECK_THAT(forced.output, Catch::Contains("fused kernel: code path avx512_bf16"));
  CHECK_THAT(forced.output, !Catch::Contains("bf16 inputs: code path"));
}
