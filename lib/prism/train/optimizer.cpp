#include "prism/train/optimizer.h"

namespace prism {

ParameterGroups group_parameters(const torch::nn::Module& model) {
  ParameterGroups g;
  for (const auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    if (p.value().dim() >= 2) {
      g.decay_names.push_back(p.key());
      g.decay_numel += p.value().numel();
    } else {
      g.no_decay_names.push_back(p.key());
      g.no_decay_numel += p.value().numel();
    }
  }
  return g;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    (p.value().dim() >= 2 ? decay : no_decay).push_back(p.value());
  }
  auto opts = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(t.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  return std::make_unique<torch::optim::AdamW>(
      groups, torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(t.weight_decay));
}

void set_learning_rate(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

}  // namespace prism
