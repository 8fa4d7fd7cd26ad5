#pragma once
// Checkpoints: model weights as safetensors (loadable by Python's safetensors /
// PyTorch, with the resolved config and schedule in __metadata__) plus the
// trainer state (AdamW moments, step, data position, RNG) for bit-exact resume.
// This is the training side (writing, and resuming with the optimizer); the
// layout and the read side for users of a trained model (latest_checkpoint,
// load_model, load_weights) are in store/checkpoint_reader.h.
//
// `latest` is replaced atomically only after both files are on disk, so a crash
// or a full disk mid-save leaves the previous checkpoint in charge.
#include <torch/torch.h>

#include <limits>
#include <string>

#include "prism/train/loader.h"
#include "prism/model/gpt.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/store/safetensors.h"

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

// State a run keeps beside the trainer's (a schedule search's architecture weights,
// their optimizer moments, its sampler): tensors and a text (JSON), saved in
// state.safetensors under "extra." and the "extra_state" metadata key.
struct CheckpointExtra {
  NamedTensors tensors;
  std::string text;
};

// Saves a checkpoint for `state.step`; keeps the newest `keep` checkpoints.
// Returns the checkpoint directory.
std::string save_checkpoint(const std::string& run_dir, GPT& model, torch::optim::AdamW& opt,
                            const TrainerState& state, const std::string& config_yaml, int keep = 2,
                            const CheckpointExtra* extra = nullptr);

// Restores weights, optimizer moments, trainer state and RNG from `ckpt_dir`,
// and into `extra` (when given) what save_checkpoint was given as its extra.
// Throws prism::Error when `extra` is asked for and the checkpoint has none.
void load_checkpoint(const std::string& ckpt_dir, GPT& model, torch::optim::AdamW& opt, TrainerState& state,
                     CheckpointExtra* extra = nullptr);

}  // namespace prism
