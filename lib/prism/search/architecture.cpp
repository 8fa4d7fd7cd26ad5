#include "prism/search/architecture.h"

#include <fmt/format.h>

#include <cmath>

#include "prism/error.h"

namespace prism {

ArchitectureWeights::ArchitectureWeights(int layers, std::vector<int> choices, const MixtureSettings& settings,
                                         int64_t max_steps, torch::Device device)
    : choices_(std::move(choices)), settings_(settings), max_steps_(std::max<int64_t>(1, max_steps)) {
  const auto K = static_cast<int64_t>(choices_.size());
  const auto opts = torch::dtype(torch::kFloat).device(device);
  logits_ = torch::zeros({layers, K}, opts).requires_grad_(true);
  m_ = torch::zeros({layers, K}, opts);
  v_ = torch::zeros({layers, K}, opts);
}

double ArchitectureWeights::temperature(int64_t step) const {
  const double f = std::min(1.0, static_cast<double>(step) / static_cast<double>(max_steps_));
  return settings_.tau_start * std::pow(settings_.tau_end / settings_.tau_start, f);
}

std::vector<double> ArchitectureWeights::probabilities(double tau) const {
  torch::NoGradGuard ng;
  auto p = torch::softmax(logits_.detach() / tau, 1).to(torch::kCPU, torch::kDouble).contiguous();
  return std::vector<double>(p.data_ptr<double>(), p.data_ptr<double>() + p.numel());
}

ForwardOptions ArchitectureWeights::mixture(double tau) const {
  ForwardOptions o;
  const auto p = torch::softmax(logits_ / tau, 1);
  for (int64_t l = 0; l < logits_.size(0); ++l) o.heads.push_back({choices_, p[l]});
  return o;
}

void ArchitectureWeights::update(int64_t step) {
  torch::NoGradGuard ng;
  auto g = logits_.grad();
  if (!g.defined()) return;
  if (static_cast<double>(step) > settings_.start * static_cast<double>(max_steps_)) {
    adam_steps_ += 1;
    m_.mul_(settings_.beta1).add_(g, 1 - settings_.beta1);
    v_.mul_(settings_.beta2).addcmul_(g, g, 1 - settings_.beta2);
    const double c1 = 1 - std::pow(settings_.beta1, static_cast<double>(adam_steps_));
    const double c2 = 1 - std::pow(settings_.beta2, static_cast<double>(adam_steps_));
    logits_.sub_(settings_.lr * (m_ / c1) / ((v_ / c2).sqrt() + settings_.eps));
  }
  logits_.mutable_grad() = torch::Tensor();
}

CheckpointExtra ArchitectureWeights::state() const {
  CheckpointExtra s;
  s.tensors = {{"logits", logits_.detach().clone()}, {"adam_m", m_.clone()}, {"adam_v", v_.clone()}};
  s.text = std::to_string(adam_steps_);
  return s;
}

void ArchitectureWeights::restore(const CheckpointExtra& s) {
  torch::NoGradGuard ng;
  auto find = [&](const std::string& name) {
    for (const auto& t : s.tensors)
      if (t.first == name) return t.second;
    throw Error(fmt::format("the checkpoint has no architecture tensor '{}'", name), "search state",
                "resume a mixture search from its own run directory");
  };
  const auto logits = find("logits");
  if (logits.sizes() != logits_.sizes())
    throw Error(fmt::format("architecture weights of shape {} in the checkpoint, {} in the search",
                            c10::str(logits.sizes()), c10::str(logits_.sizes())),
                "search state", "resume with the search file the run was started with");
  logits_.copy_(logits);
  m_.copy_(find("adam_m"));
  v_.copy_(find("adam_v"));
  adam_steps_ = std::stoll(s.text);
}

}  // namespace prism
