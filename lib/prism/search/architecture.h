#pragma once
// ArchitectureWeights: the learned mixture over head counts (DARTS-like, Liu et
// al. 2019). Layer l runs every candidate count k and weights its outputs by
// p_lk = softmax_k(alpha_lk / tau); the logits alpha (L x K) train on the same
// training loss as the model (first-order, one level: every step, both), by
// their own Adam, from `start` of the run on. The temperature tau falls
// geometrically from tau_start to tau_end over the run, so the mixture anneals
// to one count per layer and the weights end trained for the choice they make.
//
// With `paths` = n (2 <= n < K) a training micro-batch runs only n of the K counts
// per layer (ProxylessNAS's path sampling, Cai et al. 2019): n distinct counts
// drawn from p by Gumbel-top-n from the micro-batch's own stream (seed, step,
// slot), their outputs weighted by p renormalized over the n, so the n logits
// get the gradient and the attention costs n paths instead of K. Validation and
// the ranking read the full mixture.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "prism/model/gpt.h"
#include "prism/train/checkpoint.h"

namespace prism {

struct MixtureSettings {
  double lr = 5e-3;            // Adam on the logits
  double beta1 = 0.5, beta2 = 0.999, eps = 1e-8;  // DARTS's architecture Adam
  double tau_start = 1.0, tau_end = 0.05;
  double start = 0.1;          // share of the run before the logits move (the weights learn first)
  int paths = 0;               // counts run per layer and training micro-batch: 0 = all K; 2..K-1 = sampled
};

// Attention paths a training micro-batch runs per layer: paths when 0 < paths < K, else all K.
int mixture_paths(const MixtureSettings& m, size_t choices);

class SplitMix;

class ArchitectureWeights {
 public:
  // Zero logits (a uniform mixture) for `layers` x choices.size(), on `device`.
  ArchitectureWeights(int layers, std::vector<int> choices, const MixtureSettings& settings, int64_t max_steps,
                      torch::Device device);

  // tau at optimizer step `step` (0-based) of the run.
  double temperature(int64_t step) const;
  // p (L x K) at `tau`, detached, on the CPU, as doubles.
  std::vector<double> probabilities(double tau) const;
  // The forward options that run the mixture at `tau` (differentiable in the logits).
  ForwardOptions mixture(double tau) const;
  // A training micro-batch's mixture: settings.paths counts per layer drawn from
  // p at `tau` with `rng` (Gumbel-top-n; ascending by count), weighted by p
  // renormalized over them; the full mixture when paths is 0 or at least K.
  ForwardOptions sampled_mixture(double tau, SplitMix& rng) const;
  // Counts a training micro-batch runs per layer.
  int paths_run() const;
  // After optimizer step `step` (1-based): one Adam step on the logits' gradient
  // (when `step` is past the start), then the gradient is cleared.
  void update(int64_t step);

  torch::Tensor logits() const { return logits_; }  // the trained tensor (its gradient is averaged over ranks)
  const std::vector<int>& choices() const { return choices_; }

  CheckpointExtra state() const;            // logits, Adam moments and step count
  void restore(const CheckpointExtra& s);   // throws prism::Error for another shape

 private:
  std::vector<int> choices_;
  MixtureSettings settings_;
  int64_t max_steps_;
  torch::Tensor logits_, m_, v_;
  int64_t adam_steps_ = 0;
};

}  // namespace prism
