// The random streams in a checkpoint (issue 20 item 5): the CPU generator
// always, and the GPU generator of a model trained on CUDA, so dropout on a GPU
// resumes from the same stream. On the CPU: the format round-trips and a GPU
// run's checkpoint resumes here. On a GPU (prism_tests run there, or the device
// check's train + --resume): the CUDA stream continues exactly.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "prism/store/safetensors.h"
#include "prism/train/checkpoint.h"
#include "prism/train/optimizer.h"
#include "support.h"

using namespace prism;

namespace {

struct Tiny {
  Config cfg;
  GPT model{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt;
  explicit Tiny(torch::Device device) {
    cfg = parse_config(YAML::Load("model: {preset: test-tiny, dropout: 0.1}\nschedule: {heads: [2, 4]}\n"), "test");
    torch::manual_seed(0);
    model = GPT(cfg.model, cfg.schedule);
    model->to(device);
    opt = make_adamw(*model, cfg.train);
  }
};

bool has_tensor(const Safetensors& s, const std::string& name) {
  for (const auto& kv : s.tensors)
    if (kv.first == name) return true;
  return false;
}

}  // namespace

TEST_CASE("a CPU checkpoint holds the CPU stream, and restoring it continues that stream exactly", "[train][checkpoint]") {
  test::TempDir dir;
  Tiny a(torch::kCPU);
  torch::manual_seed(42);
  torch::rand({3});  // move the stream off its seed
  auto ckpt = save_checkpoint(dir.path(), a.model, *a.opt, TrainerState{}, to_yaml(a.cfg));
  auto expected = torch::rand({64});

  auto state = load_safetensors(ckpt + "/state.safetensors");
  CHECK(has_tensor(state, "rng.cpu"));
  CHECK_FALSE(has_tensor(state, "rng.cuda"));  // no GPU stream to save

  torch::manual_seed(7);
  Tiny b(torch::kCPU);
  TrainerState st;
  load_checkpoint(ckpt, b.model, *b.opt, st);
  CHECK(torch::equal(torch::rand({64}), expected));
}

TEST_CASE("a GPU run's checkpoint (with its CUDA stream) resumes on the CPU", "[train][checkpoint]") {
  test::TempDir dir;
  Tiny a(torch::kCPU);
  torch::manual_seed(5);
  auto ckpt = save_checkpoint(dir.path(), a.model, *a.opt, TrainerState{}, to_yaml(a.cfg));
  auto expected = torch::rand({16});
  // What a CUDA run adds: the device generator's state (seed and Philox offset, 16 bytes).
  const std::string state_path = ckpt + "/state.safetensors";
  auto state = load_safetensors(state_path);
  NamedTensors tensors = state.tensors;
  tensors.emplace_back("rng.cuda", torch::arange(16, torch::kUInt8));
  save_safetensors(state_path, tensors, state.metadata);

  Tiny b(torch::kCPU);
  TrainerState st;
  REQUIRE_NOTHROW(load_checkpoint(ckpt, b.model, *b.opt, st));
  CHECK(torch::equal(torch::rand({16}), expected));  // the CPU stream is restored; the CUDA one has no device here
  CHECK(torch::equal(load_safetensors(state_path).at("rng.cuda"), torch::arange(16, torch::kUInt8)));
}

TEST_CASE("on a GPU the checkpoint holds the device's stream and restoring it continues exactly", "[train][checkpoint][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device (the CUDA generator round trip needs a GPU; the device check resumes a GPU run)");
    return;
  }
  test::TempDir dir;
  const torch::Device gpu(torch::kCUDA, 0);
  Tiny a(gpu);
  torch::cuda::manual_seed_all(11);
  torch::rand({5}, torch::TensorOptions().device(gpu));
  auto ckpt = save_checkpoint(dir.path(), a.model, *a.opt, TrainerState{}, to_yaml(a.cfg));
  auto expected = torch::rand({1024}, torch::TensorOptions().device(gpu));
  CHECK(has_tensor(load_safetensors(ckpt + "/state.safetensors"), "rng.cuda"));

  torch::cuda::manual_seed_all(99);
  Tiny b(gpu);
  TrainerState st;
  load_checkpoint(ckpt, b.model, *b.opt, st);
  CHECK(torch::equal(torch::rand({1024}, torch::TensorOptions().device(gpu)), expected));
}
