// The read side of checkpoints (checkpoint_reader.h), for users of a trained
// model: a run, a checkpoint directory or a model.safetensors names the model,
// and only a complete checkpoint counts. (The round trip through the trainer's
// writer is in test/train/test_checkpoint.cpp.)
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <filesystem>

#include "prism/config/config.h"
#include "prism/error.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/store/safetensors.h"
#include "support.h"

using namespace prism;
using prism::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A checkpoint as prism train lays it out: <run>/checkpoints/step_000007/{model,state}.safetensors + latest.
struct SavedModel {
  Config cfg = parse_config(YAML::Load("model: {preset: test-tiny}\nschedule: {heads: [2, 4]}\n"), "test");
  GPT model{nullptr};
  std::string run, ckpt;
  explicit SavedModel(const TempDir& dir) : run(dir.file("run")), ckpt(dir.file("run/checkpoints/step_000007")) {
    torch::manual_seed(11);
    model = GPT(cfg.model, cfg.schedule);
    NamedTensors weights;
    for (const auto& p : model->named_parameters()) weights.emplace_back(p.key(), p.value().detach().clone());
    fs::create_directories(ckpt);
    save_safetensors(ckpt + "/model.safetensors", weights,
                     {{"format", kCheckpointFormat}, {"config", to_yaml(cfg)}, {"heads", "2,4"}, {"step", "7"}});
    save_safetensors(ckpt + "/state.safetensors", {{"x", torch::zeros({1})}});
    test::write_file(run + "/checkpoints/latest", "step_000007\n");
  }
  bool same_weights(const LoadedModel& lm) const {
    auto mine = model->named_parameters(), theirs = lm.model->named_parameters();
    if (mine.size() != theirs.size()) return false;
    for (const auto& p : mine)
      if (!theirs.contains(p.key()) || !torch::equal(p.value(), theirs[p.key()])) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("load_model: a run, a checkpoint directory or the weights file name the same model",
          "[store][checkpoint]") {
  TempDir dir("prism-ckpt-reader");
  SavedModel saved(dir);
  for (const std::string& path : {saved.run, saved.ckpt, saved.ckpt + "/model.safetensors"}) {
    INFO(path);
    const LoadedModel lm = load_model(path);
    CHECK(lm.path == saved.ckpt + "/model.safetensors");
    CHECK(lm.step == 7);
    CHECK(lm.config.schedule == saved.cfg.schedule);
    CHECK(lm.config.model.d_model == saved.cfg.model.d_model);
    CHECK(saved.same_weights(lm));
  }
}

TEST_CASE("load_model: what is not a Prism checkpoint is a clear error", "[store][checkpoint]") {
  TempDir dir("prism-ckpt-reader");
  CHECK_THROWS_WITH(load_model(dir.file("nothing-here")), Catch::Contains("no checkpoint found") &&
                                                               Catch::Contains("nothing-here"));
  save_safetensors(dir.file("plain.safetensors"), {{"a", torch::ones({2})}});
  CHECK_THROWS_WITH(load_model(dir.file("plain.safetensors")), Catch::Contains("not a Prism checkpoint"));
  // Weights of another shape than the embedded config's model.
  SavedModel saved(dir);
  NamedTensors wrong{{"wte.weight", torch::zeros({3, 3})}};
  save_safetensors(dir.file("wrong.safetensors"), wrong,
                   {{"format", kCheckpointFormat}, {"config", to_yaml(saved.cfg)}, {"step", "1"}});
  CHECK_THROWS_WITH(load_model(dir.file("wrong.safetensors")), Catch::Contains("wrong.safetensors"));
}

TEST_CASE("latest_checkpoint: only a complete checkpoint that `latest` names counts", "[store][checkpoint]") {
  TempDir dir("prism-ckpt-reader");
  CHECK_FALSE(latest_checkpoint(dir.path()).has_value());  // no checkpoints/
  SavedModel saved(dir);
  CHECK(latest_checkpoint(saved.run) == saved.ckpt);
  fs::remove(saved.ckpt + "/state.safetensors");  // a save cut short
  CHECK_FALSE(latest_checkpoint(saved.run).has_value());
  CHECK_THROWS_WITH(load_model(saved.run), Catch::Contains("no checkpoint found"));
}
