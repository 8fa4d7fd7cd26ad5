#include "prism/search/architecture.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "prism/error.h"
#include "prism/search/space.h"

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

int mixture_paths(const MixtureSettings& m, size_t choices) {
  const int K = static_cast<int>(choices);
  return m.paths > 0 && m.paths < K ? m.paths : K;
}

int ArchitectureWeights::paths_run() const { return mixture_paths(settings_, choices_.size()); }

ForwardOptions ArchitectureWeights::sampled_mixture(double tau, SplitMix& rng) const {
  const int64_t L = logits_.size(0), K = logits_.size(1), n = paths_run();
  if (n >= K) return mixture(tau);
  const auto a = logits_.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const double* alpha = a.data_ptr<double>();
  ForwardOptions o;
  std::vector<double> key(static_cast<size_t>(K));
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t l = 0; l < L; ++l) {
    // Gumbel-top-n: the n largest alpha/tau + Gumbel noise are n draws from p without replacement.
    for (int64_t k = 0; k < K; ++k) {
      const double u = std::max(rng.uniform(), 1e-300);
      key[static_cast<size_t>(k)] = alpha[l * K + k] / tau - std::log(-std::log(u));
    }
    std::iota(order.begin(), order.end(), int64_t{0});
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](int64_t x, int64_t y) { return key[static_cast<size_t>(x)] > key[static_cast<size_t>(y)]; });
    std::vector<int64_t> picked(order.begin(), order.begin() + n);
    std::sort(picked.begin(), picked.end());
    LayerHeads lh;
    for (int64_t k : picked) lh.counts.push_back(choices_[static_cast<size_t>(k)]);
    const auto idx = torch::tensor(picked, torch::dtype(torch::kLong).device(logits_.device()));
    lh.weights = torch::softmax(logits_[l].index_select(0, idx) / tau, 0);
    o.heads.push_back(std::move(lh));
  }
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
