#pragma once
// AdamW with nanoGPT's grouping: weight decay on tensors of rank >= 2 (matmul
// weights and embeddings), none on biases and LayerNorm gains.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "prism/config/train_config.h"

namespace prism {

struct ParameterGroups {
  std::vector<std::string> decay_names, no_decay_names;
  int64_t decay_numel = 0, no_decay_numel = 0;
};

ParameterGroups group_parameters(const torch::nn::Module& model);
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const TrainConfig& t);
void set_learning_rate(torch::optim::Optimizer& opt, double lr);

}  // namespace prism
