// Where a trained model runs for eval, distance and sample: --device and --backend
// chosen per command, never the back end the checkpoint trained with.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "analysis/analysis_support.h"
#include "data/data_support.h"
#include "prism/error.h"
#include "prism/model/placement.h"
#include "prism/store/safetensors.h"

using namespace prism;
using namespace prism::test;

TEST_CASE("placement: auto picks the GPU when there is one, and bad names and impossible pairs are clear errors",
          "[model][placement]") {
  const bool gpu = torch::cuda::is_available();
  Placement p = resolve_placement("auto", "auto");
  CHECK(p.device.is_cuda() == gpu);
  CHECK(p.backend == attention::Backend::Auto);
  p = resolve_placement("cpu", "reference");
  CHECK(p.device.is_cpu());
  CHECK(p.backend == attention::Backend::Reference);
  CHECK(p.describe() == "cpu, attention reference");
  CHECK_THROWS_WITH(resolve_placement("gpu", "auto"), Catch::Contains("unknown device 'gpu'") &&
                                                          Catch::Contains("--device") && Catch::Contains("auto, cpu or cuda"));
  CHECK_THROWS_WITH(resolve_placement("cpu", "flash"),
                    Catch::Contains("unknown attention back end 'flash'") && Catch::Contains("--backend"));
  // The CUDA kernel never runs on the CPU: one error, naming the flag and the way out.
  CHECK_THROWS_WITH(resolve_placement("cpu", "cuda"), Catch::Contains("--backend") && Catch::Contains("--backend auto"));
  if (gpu) {
    CHECK(resolve_placement("cuda", "auto").device.is_cuda());
    CHECK_THROWS_WITH(resolve_placement("cuda", "fused"), Catch::Contains("CPU kernel") && Catch::Contains("--device cpu"));
  } else {
    try {
      resolve_placement("cuda", "auto");
      FAIL("--device cuda on a machine without a GPU was accepted");
    } catch (const Error& e) {
      CHECK(e.where() == "--device");
      CHECK_THAT(e.what_part(), Catch::Contains("no CUDA device is available"));
      CHECK_THAT(e.fix(), Catch::Contains("set --device to cpu or auto"));
    }
  }
  // The trainer's train.device follows the same rule, naming its own key.
  CHECK(resolve_device("cpu", "train.device").is_cpu());
  CHECK_THROWS_WITH(resolve_device("tpu", "train.device"), Catch::Contains("train.device"));
}

namespace {

// A copy of `run` whose checkpoint says it trained with attention.backend: cuda,
// as every paper-scale study run does.
std::string cuda_trained_copy(const std::string& run, const std::string& to) {
  std::filesystem::copy(run, to, std::filesystem::copy_options::recursive);
  const std::string model = to + "/checkpoints/step_000004/model.safetensors";
  Safetensors st = load_safetensors(model);
  YAML::Node config = YAML::Load(st.metadata.at("config"));
  REQUIRE(config["attention"]["backend"].as<std::string>() == "auto");
  config["attention"]["backend"] = "cuda";
  st.metadata["config"] = YAML::Dump(config);
  save_safetensors(model, st.tensors, st.metadata);
  return to;
}

}  // namespace

TEST_CASE("a checkpoint trained with backend cuda evaluates, measures distance and samples on the CPU",
          "[model][placement][cli]") {
  TwoRuns runs(4);
  const std::string cuda_run = cuda_trained_copy(runs.prism, runs.dir.file("runs/cuda-trained"));
  const std::string vocab = vocab_path();
  const std::string hs = source_path("test/fixtures/hellaswag.jsonl");
  const std::string eval = fmt::format("eval {} --task hellaswag --data {} --vocab {} --threads 1", cuda_run, hs, vocab);
  const std::string distance = fmt::format("distance {} --data {} --tokens 256 --batch 2 --threads 1", cuda_run, runs.shards);
  const std::string sample = fmt::format("sample {} --prompt Hello --tokens 4 --vocab {} --threads 1", cuda_run, vocab);

  auto r = run_prism(eval + " --device cpu");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("hellaswag: acc") && Catch::Contains("cpu, attention auto"));
  // The same scores as the run it was copied from, whose config says auto.
  auto same = run_prism(fmt::format("eval {} --task hellaswag --data {} --vocab {} --threads 1 --device cpu --no-store",
                                    runs.prism, hs, vocab));
  REQUIRE(same.exit_code == 0);
  const auto result_line = [](const std::string& out) { return out.substr(out.find("hellaswag: acc"), 60); };
  CHECK(result_line(r.output) == result_line(same.output));
  r = run_prism(eval + " --device cpu --backend reference --no-store");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(result_line(r.output) == result_line(same.output));

  r = run_prism(distance + " --device cpu");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("D_l on 256 held-out tokens") && Catch::Contains("/attention/heldout"));
  CHECK(read_run(cuda_run + "/run.h5")["datasets"]["attention/heldout/distance"].size() == 2);

  r = run_prism(sample + " --device cpu");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Hello") && Catch::Contains("cpu, attention auto"));

  // --device cuda: runs where there is a GPU, and is one clear line (what, where, fix) where there is none.
  for (const std::string& command : {eval + " --no-store", distance, sample}) {
    INFO(command);
    r = run_prism(command + " --device cuda");
    INFO(r.output);
    if (torch::cuda::is_available()) {
      CHECK(r.exit_code == 0);
    } else {
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.output, Catch::Contains("--device: cuda was asked for and no CUDA device is available") &&
                               Catch::Contains("Fix: set --device to cpu or auto"));
    }
    // The CUDA kernel on the CPU is refused before any model is loaded.
    r = run_prism(command + " --device cpu --backend cuda");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--backend") && Catch::Contains("attention back end 'cuda'"));
  }
}
