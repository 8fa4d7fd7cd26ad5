// `prism bench train`: its table, the profile summary, the torch.compile
// reference, and its refusals (apps/prism/bench_train.cpp).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "prism/data/prepare.h"
#include "small_corpus.h"
#include "support.h"

using namespace prism;

namespace {
const char* kTiny = "bench train --model test-tiny --batch 2 --seq 16 --steps 2 --warmup 1 --dtype fp32 --threads 1";
}

TEST_CASE("bench train prints its table and, asked, where the step's time goes", "[cli][bench]") {
  auto r = test::run_prism(std::string(kTiny) + " --compare none --profile-summary --vocab 300");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("vocab 300"));
  CHECK_THAT(r.output, Catch::Contains("Prism C++, uniform"));
  CHECK_THAT(r.output, Catch::Contains("matmul peak measured here"));
  CHECK_THAT(r.output, Catch::Contains("best of"));
  // Per arm: the categories with their share of the step, then the top operations.
  CHECK_THAT(r.output, Catch::Contains("fp32 Prism C++, uniform 4x2: 2 profiled steps"));
  CHECK_THAT(r.output, Catch::Contains("untracked (between ops)"));
  CHECK_THAT(r.output, Catch::Contains("top 12 operations by self time"));
  CHECK_THAT(r.output, Catch::Contains("matmul"));
  CHECK_THAT(r.output, Catch::Contains("optimizer"));
}

TEST_CASE("bench train --config takes the model, the data's vocabulary and the schedule from a config", "[cli][bench][config]") {
  test::TempDir dir("prism-bench-config");
  REQUIRE(test::prepare_small_corpus(dir, 300).vocab_size == 300);
  const std::string config = dir.file("run.yaml");
  test::write_file(config, fmt::format("model: {{preset: test-tiny}}\nschedule: {{heads: [1, 4]}}\n"
                                       "data: {{dir: '{}'}}\ntrain: {{batch_size: 2, seq_len: 16}}\n",
                                       dir.file("data")));
  auto r = test::run_prism(fmt::format("bench train --config '{}' --steps 1 --warmup 0 --dtype fp32 --threads 1 "
                                       "--compare none", config));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains(fmt::format("vocab 300 (from {})", dir.file("data"))));
  CHECK_THAT(r.output, Catch::Contains("B=2 T=16"));
  CHECK_THAT(r.output, Catch::Contains("Prism C++, 1,4 "));  // the config's schedule is the Prism arm
  // Overrides compose as in prism train; an explicit --seq wins over the config's.
  auto o2 = test::run_prism(fmt::format("bench train --config '{}' --set train.batch_size=1 --seq 8 --steps 1 --warmup 0 "
                                        "--dtype fp32 --threads 1 --compare none", config));
  INFO(o2.output);
  REQUIRE(o2.exit_code == 0);
  CHECK_THAT(o2.output, Catch::Contains("B=1 T=8"));
  auto clash = test::run_prism(fmt::format("bench train --config '{}' --vocab 512", config));
  CHECK(clash.exit_code != 0);
  CHECK_THAT(clash.output, Catch::Contains("--vocab together with --config") && Catch::Contains("--set"));
}

TEST_CASE("PRISM_CPU_ISA holds every CPU kernel of a training step to that code path", "[cli][bench]") {
  auto r = test::run_prism(std::string(kTiny) + " --compare none");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("MLP bias + GELU kernels: Highway "));
  CHECK_THAT(r.output, Catch::Contains("AdamW on bf16 working copies: Highway "));
  auto bogus = test::run(fmt::format("PRISM_CPU_ISA=avx9 '{}' {} --compare none", PRISM_BINARY, kTiny));
  CHECK(bogus.exit_code != 0);
  CHECK_THAT(bogus.output, Catch::Contains("environment variable PRISM_CPU_ISA: unknown CPU code path 'avx9'") &&
                               Catch::Contains("Fix: unset it"));
  auto forced = test::run(fmt::format("PRISM_CPU_ISA=avx2 '{}' {} --compare none", PRISM_BINARY, kTiny));
  INFO(forced.output);
  if (r.output.find("fused attention kernel avx") == std::string::npos) {
    // A CPU without AVX2 (Arm, or an old x86): the variable is refused, saying why.
    CHECK(forced.exit_code != 0);
    CHECK_THAT(forced.output, Catch::Contains("PRISM_CPU_ISA"));
    return;
  }
  // On an AVX2 or AVX-512 CPU: the attention kernel and the row kernels all run AVX2.
  REQUIRE(forced.exit_code == 0);
  CHECK_THAT(forced.output, Catch::Contains("fused attention kernel avx2 "));
  CHECK_THAT(forced.output, Catch::Contains("MLP bias + GELU kernels: Highway AVX2;"));
  CHECK_THAT(forced.output, Catch::Contains("residual add + LayerNorm: Highway AVX2;"));
  CHECK_THAT(forced.output, Catch::Contains("AdamW on bf16 working copies: Highway AVX2;"));
}

TEST_CASE("bench train times the reference under torch.compile, compile time apart", "[cli][bench]") {
  // Under a CPU-capability cap the compiled reference gets its own Inductor cache: PyTorch's
  // shared one mixed kernels compiled under different caps (NaN losses, heap corruption). The
  // MKL and oneDNN caps of the environment (PRISM_CI_ISA=avx2) add their own tags after "-default".
  auto r = test::run(fmt::format("ATEN_CPU_CAPABILITY=default '{}' {} --compare both", PRISM_BINARY, kTiny));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("torch.compile cache: ") && Catch::Contains("prism-torchinductor-uid") &&
                           Catch::Contains("-default") && Catch::Contains(" (its own for these ISA caps"));
  CHECK_THAT(r.output, Catch::Contains("PyTorch eager, uniform"));
  CHECK_THAT(r.output, Catch::Contains("PyTorch torch.compile, uniform"));
  CHECK_THAT(r.output, Catch::Contains("fp32: torch.compile took"));
}

TEST_CASE("bench train refuses unknown choices with the fix", "[cli][bench]") {
  auto r = test::run_prism(std::string(kTiny) + " --compare jit");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("unknown --compare jit"));
  CHECK_THAT(r.output, Catch::Contains("eager, compiled, both or none"));
  r = test::run_prism(std::string(kTiny) + " --vocab 1");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("--vocab 1 is too small"));
}

TEST_CASE("bench train flags a reference loop whose loss is not finite, and refuses one that prints no result",
          "[cli][bench]") {
  // A stand-in for the reference's Python: it prints what train_reference.py prints when its
  // last loss was NaN (JSON has no NaN: null), or nothing that parses.
  test::TempDir dir("prism-bench-ref");
  const std::string nan_python = dir.file("nan-python"), bad_python = dir.file("bad-python");
  test::write_file(nan_python,
                   "#!/bin/sh\necho '{\"tokens_per_s\": 1000.0, \"seconds\": 1.0, \"loss\": null, \"threads\": 1, "
                   "\"compiled\": false, \"warmup_steps\": 1, \"compile_s\": 0.0}'\n");
  test::write_file(bad_python, "#!/bin/sh\necho '{\"loss\": NaN}'\n");
  REQUIRE(test::run(fmt::format("chmod +x '{}' '{}'", nan_python, bad_python)).exit_code == 0);
  auto r = test::run_prism(fmt::format("{} --compare eager --python '{}'", kTiny, nan_python));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PyTorch eager, uniform"));
  CHECK_THAT(r.output, Catch::Contains("fp32: warning: the PyTorch eager loop's loss was not finite"));
  r = test::run_prism(fmt::format("{} --compare eager --python '{}'", kTiny, bad_python));
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("error: ") && Catch::Contains("the PyTorch reference loop printed no result line") &&
                           Catch::Contains("Fix: run that command"));
  CHECK_THAT(r.output, !Catch::Contains("internal error"));
}

TEST_CASE("bench ddp times 2 processes against 1, in fp32 and on bf16 working copies", "[cli][bench][ddp]") {
  auto bad = test::run_prism("bench ddp --dtype fp16");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.output, Catch::Contains("unknown --dtype fp16") && Catch::Contains("use fp32 or bf16"));
  auto probe = test::run_prism("bench ddp --model test-tiny --batch 2 --seq 16 --steps 1 --warmup 1");
  if (probe.output.find("no data-parallel training") != std::string::npos) {
    WARN("SKIPPED: this build has no c10d Gloo (" << probe.output << ")");
    return;
  }
  INFO(probe.output);
  REQUIRE(probe.exit_code == 0);
  CHECK_THAT(probe.output, Catch::Contains("random tokens, fp32,"));
  auto r = test::run_prism("bench ddp --model test-tiny --batch 2 --seq 16 --steps 2 --warmup 1 --dtype bf16");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("bf16 (autocast on bf16 working copies"));
  CHECK_THAT(r.output, Catch::Contains("2 processes, B x T each"));
  CHECK_THAT(r.output, Catch::Contains("throughput:"));
}

TEST_CASE("where bf16 is emulated the benches leave it out by default, or time it with the fewest steps, saying so",
          "[cli][bench][dtype]") {
  // The ISA capped as on an AVX2-only CPU: LibTorch emulates bf16 there (0.004-0.08x fp32's matmul rate).
  test::TempDir dir("prism-bench-emulated");
  const std::string env = fmt::format(
      "PRISM_CACHE_DIR='{}' ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2",
      dir.file("cache"));
  const std::string tiny = "--model test-tiny --batch 2 --seq 16 --steps 4 --warmup 2 --threads 1 --compare none";
  auto a = test::run(fmt::format("{} '{}' bench train {} --dtype auto", env, PRISM_BINARY, tiny));
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.output, Catch::Contains("bf16: skipped: no fast bf16 path on this CPU (bf16 matmuls ran") &&
                           Catch::Contains("fp32  Prism C++, uniform") && !Catch::Contains("bf16  Prism C++"));
  auto b = test::run(fmt::format("{} '{}' bench train {} --dtype both", env, PRISM_BINARY, tiny));
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK_THAT(b.output, Catch::Contains("timed with 2 steps after 1 warm-up and a 256^3 peak") &&
                           Catch::Contains("ETA of the bf16 block about") && Catch::Contains("bf16  Prism C++, uniform") &&
                           Catch::Contains("(256^3 bf16 mm") && Catch::Contains("(2048^3 fp32 mm"));
  const std::string att = "--T 64 --head-dim 64 --width 128 --tokens 64 --repeat 3 --threads 1 --backends sdpa,fused";
  auto c = test::run(fmt::format("{} '{}' bench attention {}", env, PRISM_BINARY, att));
  INFO(c.output);
  REQUIRE(c.exit_code == 0);
  CHECK_THAT(c.output, Catch::Contains("bf16: left out: no fast bf16 path on this CPU") && Catch::Contains("ETA: about") &&
                           Catch::Contains("   64   64  fp32") && !Catch::Contains("   64   64  bf16"));
  auto d = test::run(fmt::format("{} '{}' bench attention {} --dtype bf16", env, PRISM_BINARY, att));
  INFO(d.output);
  REQUIRE(d.exit_code == 0);
  CHECK_THAT(d.output, Catch::Contains("one timed round per bf16 case") && Catch::Contains("   64   64  bf16"));
}
