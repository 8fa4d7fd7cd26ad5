#pragma once
// The read side of a run's checkpoints, for everything that uses a trained
// model without training it (analysis, eval, sweeps, the CLI). train/checkpoint.h
// writes them (it needs the optimizer); this file only reads them, so readers
// do not depend on train/.
//
// Layout under a run directory:
//   checkpoints/step_000500/model.safetensors   weights, with the resolved config,
//                                               schedule and step in __metadata__
//   checkpoints/step_000500/state.safetensors   trainer state (train/checkpoint.h)
//   checkpoints/latest                          names the newest complete checkpoint
#include <optional>
#include <string>

#include "prism/config/config.h"
#include "prism/model/gpt.h"

namespace prism {

// The `format` entry of a model.safetensors written by prism train.
extern const char* const kCheckpointFormat;

// The newest complete checkpoint directory of a run (both files present), if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

// A model rebuilt from a checkpoint alone (config + schedule come from the
// metadata). `path` may be a run directory (its latest checkpoint), a
// checkpoint directory or a model.safetensors file. Throws prism::Error naming
// the path when there is no checkpoint or the file is not a Prism checkpoint.
struct LoadedModel {
  Config config;
  GPT model{nullptr};
  int64_t step = 0;
  std::string path;  // the model.safetensors read
};
LoadedModel load_model(const std::string& path);

// The model.safetensors that `path` names: the file itself, a checkpoint
// directory's, or a run directory's latest. Throws prism::Error naming `path`.
std::string checkpoint_model_file(const std::string& path);

// Copies weights by name; throws prism::Error naming missing or mis-shaped tensors.
void load_weights(GPT& model, const std::string& model_safetensors);

}  // namespace prism
