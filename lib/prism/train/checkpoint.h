#pragma once
// Checkpoints: model weights as safetensors (loadable by Python's safetensors /
// PyTorch, with the resolved config and schedule in __metadata__) plus the
// trainer state (AdamW moments, step, data position, RNG) for bit-exact resume.
//
// Layout under a run directory:
//   checkpoints/step_000500/model.safetensors
//   checkpoints/step_000500/state.safetensors
//   checkpoints/latest          <- names the newest complete checkpoint
// `latest` is replaced atomically only after both files are on disk, so a crash
// or a full disk mid-save leaves the previous checkpoint in charge.
#include <torch/torch.h>

#include <limits>
#include <optional>
#include <string>

#include "prism/config/config.h"
#include "prism/data/loader.h"
#include "prism/model/gpt.h"

namespace prism {

struct TrainerState {
  int64_t step = 0;        // optimizer steps completed
  int64_t tokens = 0;      // training tokens consumed (all ranks)
  double elapsed_s = 0;    // training wall time so far
  LoaderState loader;
  double best_val_loss = std::numeric_limits<double>::infinity();
  int64_t best_val_step = -1;
  int world_size = 1;      // processes that trained it (resume may use another with the same global batch)
};

// Saves a checkpoint for `state.step`; keeps the newest `keep` checkpoints.
// Returns the checkpoint directory.
std::string save_checkpoint(const std::string& run_dir, GPT& model, torch::optim::AdamW& opt,
                            const TrainerState& state, const std::string& config_yaml, int keep = 2);

// The newest complete checkpoint of a run, if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

// Restores weights, optimizer moments, trainer state and RNG from `ckpt_dir`.
void load_checkpoint(const std::string& ckpt_dir, GPT& model, torch::optim::AdamW& opt, TrainerState& state);

// A model rebuilt from a checkpoint alone (config + schedule come from the
// metadata). `path` may be a run directory, a checkpoint directory or a
// model.safetensors file.
struct LoadedModel {
  Config config;
  GPT model{nullptr};
  int64_t step = 0;
  std::string path;  // the model.safetensors read
};
LoadedModel load_model(const std::string& path);

// Copies weights by name; throws prism::Error naming missing or mis-shaped tensors.
void load_weights(GPT& model, const std::string& model_safetensors);

}  // namespace prism
