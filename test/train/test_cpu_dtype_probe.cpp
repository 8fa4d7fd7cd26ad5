// train.dtype auto on the CPU: the faster dtype, measured by a matmul probe and cached
// (lib/prism/train/cpu_dtype_probe.h).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>

#include "prism/train/cpu_dtype_probe.h"
#include "prism/train/execution.h"
#include "support.h"

using namespace prism;
using namespace prism::test;

namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const std::string& n, const std::string& v) : name(n), had(std::getenv(n.c_str()) != nullptr) {
    if (had) old = std::getenv(n.c_str());
    ::setenv(n.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had) ::setenv(name.c_str(), old.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("dtype auto: bf16 only where its matmuls beat fp32's by the margin, saying why", "[train][dtype]") {
  const CpuDtypeChoice fast = decide_cpu_dtype({120.0, 400.0, 1024}, true);
  CHECK(fast.bf16);
  CHECK_THAT(fast.reason, Catch::Contains("auto -> bf16") && Catch::Contains("3.33x fp32's") &&
                              Catch::Contains("bf16 400, fp32 120 GFLOP/s"));
  // The Xeon of issue 31: AVX512-BF16 without AMX, bf16 matmuls at half the fp32 rate.
  const CpuDtypeChoice slow = decide_cpu_dtype({324.0, 165.0, 2048}, true);
  CHECK(!slow.bf16);
  CHECK_THAT(slow.reason, Catch::Contains("auto -> fp32") && Catch::Contains("0.51x") && Catch::Contains("from 1.2x"));
  CHECK(!decide_cpu_dtype({100.0, 110.0, 1024}, true).bf16);  // a tie in matmuls loses the step's casts
  const CpuDtypeChoice none = decide_cpu_dtype({}, false);
  CHECK(!none.bf16);
  CHECK_THAT(none.reason, Catch::Contains("no native bf16"));
}

TEST_CASE("dtype auto: measured once per machine, then read from the cache", "[train][dtype]") {
  TempDir dir("prism-dtype-cache");
  ScopedEnv cache("PRISM_CACHE_DIR", dir.path());
  CHECK(cpu_dtype_cache_path() == dir.file("cpu-dtype.json"));
  const CpuDtypeChoice first = choose_cpu_dtype();
  if (!cpu_supports_bf16()) {  // nothing to measure: fp32, and why
    CHECK(!first.bf16);
    CHECK_THAT(first.reason, Catch::Contains("no native bf16"));
    return;
  }
  CHECK(!first.cached);
  CHECK(first.rates.fp32_gflops > 0);
  CHECK(first.rates.bf16_gflops > 0);
  CHECK_THAT(first.reason, Catch::Contains("measured now, cached in " + dir.file("cpu-dtype.json")));
  const auto saved = nlohmann::json::parse(read_file(dir.file("cpu-dtype.json")));
  REQUIRE(saved.contains(cpu_dtype_cache_key()));
  CHECK(saved[cpu_dtype_cache_key()]["fp32_gflops"].get<double>() == first.rates.fp32_gflops);
  CHECK_THAT(cpu_dtype_cache_key(), Catch::Contains(fmt::format("| {} threads", torch::get_num_threads())) &&
                                        Catch::Contains("LibTorch "));
  const CpuDtypeChoice again = choose_cpu_dtype();
  CHECK(again.cached);
  CHECK(again.bf16 == first.bf16);
  CHECK(again.rates.bf16_gflops == first.rates.bf16_gflops);
  // A damaged cache is measured around and rewritten, never an error.
  write_file(dir.file("cpu-dtype.json"), "{not json");
  const CpuDtypeChoice fresh = choose_cpu_dtype();
  CHECK(!fresh.cached);
  CHECK(nlohmann::json::parse(read_file(dir.file("cpu-dtype.json"))).contains(cpu_dtype_cache_key()));
  // A cache that cannot be written: measured, and said.
  ScopedEnv nowhere("PRISM_CACHE_DIR", "/proc/prism-no-such-dir");
  const CpuDtypeChoice uncached = choose_cpu_dtype();
  CHECK_THAT(uncached.reason, Catch::Contains("not cached"));
}

TEST_CASE("prism train with dtype auto logs the dtype it picked and why", "[train][dtype][cli]") {
  TempDir dir("prism-dtype-train");
  auto shards = run_reference("make_shards.py", dir.file("shards"));
  REQUIRE(shards.exit_code == 0);
  write_file(dir.file("run.yaml"), fmt::format("model: {{preset: test-tiny, vocab_size: 50257}}\n"
                                               "train: {{batch_size: 2, seq_len: 16, max_steps: 2, eval_every: 0,\n"
                                               "        distance_every: 0, checkpoint_every: 0, threads: 1, dtype: auto}}\n"
                                               "data: {{dir: {}}}\n",
                                               dir.file("shards")));
  auto r = run(fmt::format("PRISM_CACHE_DIR='{}' '{}' train {} --out {}", dir.file("cache"), PRISM_BINARY,
                           dir.file("run.yaml"), dir.file("run")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("dtype: auto -> "));
  auto fixed = run_prism(fmt::format("train {} --out {} train.dtype=fp32", dir.file("run.yaml"), dir.file("run-fp32")));
  INFO(fixed.output);
  REQUIRE(fixed.exit_code == 0);
  CHECK_THAT(fixed.output, Catch::Contains("dtype: fp32, as train.dtype says"));
}

TEST_CASE("bf16 without a fast path: emulated where unsupported or measured far below fp32", "[train][dtype]") {
  CHECK(bf16_emulated({}, false));                     // no AVX512-BF16 / AMX / Arm BF16: LibTorch emulates it
  CHECK(bf16_emulated({74.0, 0.3, 1024}, true));       // the flag, but the ISA capped (ONEDNN_MAX_CPU_ISA=AVX2)
  CHECK(!bf16_emulated({324.0, 165.0, 2048}, true));   // the Xeon: native, slower, not emulated
  CHECK(!bf16_emulated({120.0, 400.0, 1024}, true));
}

TEST_CASE("bf16 slower than fp32: the warning gives the ratio, the ETA in both dtypes and the fix", "[train][dtype]") {
  StepWork w;
  w.d_model = 128;
  w.rows = 2048;
  w.flops = 1e10;
  w.steps = 600;
  // An AVX2-only EPYC: 0.3 GFLOP/s against 74 at 1024^3; at the model's shapes 2 against 50.
  const std::string emulated = format_slow_bf16_warning({74.0, 0.3, 1024}, false, {50.0, 2.0, 0}, w);
  INFO(emulated);
  CHECK_THAT(emulated, Catch::StartsWith("warning: train.dtype is bf16") && Catch::Contains("0.00405x") &&
                           Catch::Contains("LibTorch emulates it") && Catch::Contains("600 steps") &&
                           Catch::Contains("about 50m00s in bf16 against about 2m00s in fp32") &&
                           Catch::Contains("Fix: train.dtype=auto") && Catch::Contains("train.dtype=fp32"));
  const std::string xeon = format_slow_bf16_warning({324.0, 165.0, 2048}, true, {300.0, 150.0, 0}, w);
  CHECK_THAT(xeon, Catch::Contains("0.509x") && Catch::Contains("native bf16, but slower"));
  CHECK(format_slow_bf16_warning({120.0, 400.0, 1024}, true, {100.0, 300.0, 0}, w).empty());
  CHECK(format_slow_bf16_warning({100.0, 100.0, 1024}, true, {100.0, 100.0, 0}, w).empty());  // not slower
}

TEST_CASE("prism train where bf16 is emulated: auto trains fp32 and records it, bf16 warns before step 1",
          "[train][dtype][cli]") {
  // The ISA capped as on an AVX2-only CPU: oneDNN, MKL and ATen without AVX-512, so bf16 matmuls are emulated
  // (on a CPU without AVX-512 the caps change nothing: bf16 is emulated there anyway).
  TempDir dir("prism-dtype-emulated");
  auto shards = run_reference("make_shards.py", dir.file("shards") + " --vocab 512 --train-tokens 20000 --val-tokens 4000");
  REQUIRE(shards.exit_code == 0);
  write_file(dir.file("run.yaml"), fmt::format("model: {{preset: test-tiny, vocab_size: 512}}\n"
                                               "train: {{batch_size: 2, seq_len: 16, max_steps: 2, eval_every: 0, log_every: 1,\n"
                                               "        distance_every: 0, checkpoint_every: 0, threads: 1, dtype: auto}}\n"
                                               "data: {{dir: {}}}\n",
                                               dir.file("shards")));
  const std::string env = fmt::format(
      "PRISM_CACHE_DIR='{}' ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2",
      dir.file("cache"));
  auto a = run(fmt::format("{} '{}' train {} --out {}", env, PRISM_BINARY, dir.file("run.yaml"), dir.file("auto")));
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.output, Catch::Contains("dtype: auto -> fp32"));
  CHECK_THAT(a.output, !Catch::Contains("warning: train.dtype is bf16"));
  // What ran is recorded: config.yaml's train.dtype (resolved, as the vocabulary is) and run.h5's attributes.
  CHECK_THAT(read_file(dir.file("auto/config.yaml")), Catch::Contains("dtype: fp32"));
  auto h5 = run_reference("read_run.py", dir.file("auto/run.h5"));  // h5py's view of the attributes
  INFO(h5.output);
  REQUIRE(h5.exit_code == 0);
  CHECK_THAT(h5.output, Catch::Contains("\"dtype\": \"fp32\"") && Catch::Contains("\"dtype_reason\": \"auto -> fp32"));

  auto b = run(fmt::format("{} '{}' train {} --out {} train.dtype=bf16", env, PRISM_BINARY, dir.file("run.yaml"),
                           dir.file("bf16")));
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  const auto warning = b.output.find("warning: train.dtype is bf16");
  const auto first_step = b.output.find("step      1/2");
  REQUIRE(warning != std::string::npos);
  REQUIRE(first_step != std::string::npos);
  CHECK(warning < first_step);
  CHECK_THAT(b.output, Catch::Contains("x as fast as fp32") && Catch::Contains("2 steps and 2 validations would take about") &&
                           Catch::Contains("Fix: train.dtype=auto"));
  CHECK_THAT(read_file(dir.file("bf16/config.yaml")), Catch::Contains("dtype: bf16"));
}
