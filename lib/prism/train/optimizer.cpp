#include "prism/train/optimizer.h"

#include "prism/ops/adamw.h"
#include "prism/ops/cpu_isa.h"

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
  return std::make_unique<FusedAdamW>(
      groups, torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(t.weight_decay));
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode grad(true);
    loss = closure();
  }
  const double grad_scale = grad_scale_.defined() ? grad_scale_.item<double>() : 1.0;
  if (copies_) check_cpu_isa_env();
  for (auto& group : param_groups()) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    TORCH_CHECK(!o.amsgrad(), "FusedAdamW: amsgrad is not supported");
    std::vector<torch::Tensor> params, grads, m, v, steps;
    std::vector<torch::optim::AdamWParamState*> states;
    for (auto& p : group.params()) {
      auto* copy = copies_ ? copies_->entry_of(p) : nullptr;
      const WorkingCopies::StepGrad* cg = copy ? &copies_->step_grad(*copy) : nullptr;
      const torch::Tensor g = cg ? cg->dense : p.grad();
      if (!g.defined()) continue;
      auto& slot = state()[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto st = std::make_unique<torch::optim::AdamWParamState>();
        st->step(0);
        st->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        st->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(st);
      }
      auto* st = static_cast<torch::optim::AdamWParamState*>(slot.get());
      if (copy) {
        // This parameter and its working copy, in one pass of our kernel.
        AdamWHyperparameters h;
        h.lr = o.lr();
        h.beta1 = std::get<0>(o.betas());
        h.beta2 = std::get<1>(o.betas());
        h.eps = o.eps();
        h.weight_decay = o.weight_decay();
        h.step = st->step() + 1;
        h.grad_scale = grad_scale;
        adamw_step_with_copy(p, g, cg->rows, st->exp_avg(), st->exp_avg_sq(), copy->copy, h);
        copies_->written(*copy);
        st->step(st->step() + 1);
        continue;
      }
      params.push_back(p);
      grads.push_back(g);
      m.push_back(st->exp_avg());
      v.push_back(st->exp_avg_sq());
      // The kernel reads the already-incremented step count (bias corrections).
      steps.push_back(torch::full({}, static_cast<double>(st->step() + 1), p.options().dtype(torch::kFloat)));
      states.push_back(st);
    }
    if (params.empty()) continue;
    at::_fused_adamw_(params, grads, m, v, {}, steps, o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()),
                      o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false,
                      grad_scale_.defined() ? std::optional<torch::Tensor>(grad_scale_) : std::nullopt);
    for (auto* st : states) st->step(st->step() + 1);
  }
  return loss;
}

void set_learning_rate(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

}  // namespace prism
