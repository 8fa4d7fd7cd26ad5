#include <catch2/catch.hpp>

#include "prism/model/gpt.h"
#include "prism/train/lr_schedule.h"
#include "prism/train/optimizer.h"

using namespace prism;

TEST_CASE("learning rate: linear warmup, cosine decay to the floor", "[train]") {
  TrainConfig t;
  t.lr = 1e-3;
  t.min_lr_ratio = 0.1;
  t.warmup_steps = 10;
  t.max_steps = 110;
  CHECK(learning_rate(t, 0) == Approx(1e-4));
  CHECK(learning_rate(t, 4) == Approx(5e-4));
  CHECK(learning_rate(t, 9) == Approx(1e-3));
  CHECK(learning_rate(t, 10) == Approx(1e-3));
  CHECK(learning_rate(t, 60) == Approx(1e-4 + 0.5 * 9e-4));  // half way: cos(pi/2) = 0
  CHECK(learning_rate(t, 110) == Approx(1e-4));
  CHECK(learning_rate(t, 500) == Approx(1e-4));  // stays at the floor
  for (int64_t s = 11; s < 110; ++s) CHECK(learning_rate(t, s) <= learning_rate(t, s - 1));
  t.decay = "linear";
  CHECK(learning_rate(t, 60) == Approx(1e-4 + 0.5 * 9e-4));
  CHECK(learning_rate(t, 35) == Approx(1e-4 + 0.75 * 9e-4));
  t.decay = "constant";
  CHECK(learning_rate(t, 100) == Approx(1e-3));
}

TEST_CASE("AdamW groups decay matrices and embeddings, not biases and LayerNorm", "[train]") {
  GPT m(model_preset("test-tiny"), HeadSchedule::uniform(2, 4));
  auto g = group_parameters(*m);
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  CHECK(has(g.decay_names, "wte.weight"));
  CHECK(has(g.decay_names, "h.0.attn.c_attn.weight"));
  CHECK(has(g.no_decay_names, "h.0.attn.c_attn.bias"));
  CHECK(has(g.no_decay_names, "h.1.ln_2.weight"));
  CHECK(g.decay_numel + g.no_decay_numel == m->num_params());
  TrainConfig t;
  t.weight_decay = 0.1;
  auto opt = make_adamw(*m, t);
  REQUIRE(opt->param_groups().size() == 2);
  CHECK(static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[0].options()).weight_decay() == 0.1);
  CHECK(static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[1].options()).weight_decay() == 0.0);
  CHECK(static_cast<int64_t>(opt->param_groups()[0].params().size()) == static_cast<int64_t>(g.decay_names.size()));
  set_learning_rate(*opt, 0.5);
  CHECK(static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[1].options()).lr() == 0.5);
}

TEST_CASE("FusedAdamW makes the same updates as torch::optim::AdamW", "[train]") {
  // Parameters with random gradients of ordinary size (a model's K bias has a
  // gradient of pure rounding noise, which Adam amplifies differently per kernel).
  torch::manual_seed(3);
  struct Params : torch::nn::Module {
    Params() {
      w = register_parameter("w", torch::randn({64, 32}));
      b = register_parameter("b", torch::randn({32}));
    }
    torch::Tensor w, b;
  };
  auto a = std::make_shared<Params>(), b = std::make_shared<Params>();
  b->w.data().copy_(a->w);
  b->b.data().copy_(a->b);
  TrainConfig t;
  t.lr = 1e-2;
  t.weight_decay = 0.1;
  auto fused = make_adamw(*a, t);
  REQUIRE(dynamic_cast<FusedAdamW*>(fused.get()) != nullptr);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto opts = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(wd));
  };
  groups.emplace_back(std::vector<torch::Tensor>{b->w}, opts(t.weight_decay));
  groups.emplace_back(std::vector<torch::Tensor>{b->b}, opts(0.0));
  torch::optim::AdamW plain(groups, torch::optim::AdamWOptions(t.lr));
  for (int s = 0; s < 5; ++s) {
    auto gw = torch::randn({64, 32}), gb = torch::randn({32});
    a->w.mutable_grad() = gw.clone();
    a->b.mutable_grad() = gb.clone();
    b->w.mutable_grad() = gw.clone();
    b->b.mutable_grad() = gb.clone();
    fused->step();
    plain.step();
  }
  CHECK((a->w - b->w).abs().max().item<double>() < 1e-6);
  CHECK((a->b - b->b).abs().max().item<double>() < 1e-6);
  auto* st = static_cast<torch::optim::AdamWParamState*>(fused->state().at(a->w.unsafeGetTensorImpl()).get());
  CHECK(st->step() == 5);
}

TEST_CASE("FusedAdamW's grad scale clips as clip_grad_norm_ then a step does", "[train]") {
  // optimizer_step hands the clip coefficient to the fused AdamW (one pass over the
  // gradients); the weights must be those of clip_grad_norm_ + step.
  TrainConfig tc;
  tc.lr = 1e-2;
  for (double scale : {10.0, 1e-3}) {  // gradients far above the clip (clipped) and below it (not)
    INFO("gradient scale " << scale);
    torch::manual_seed(0);
    GPT a(model_preset("test-tiny"), HeadSchedule::uniform(2, 4));
    GPT b(model_preset("test-tiny"), HeadSchedule::uniform(2, 4));
    {
      torch::NoGradGuard ng;
      for (size_t i = 0; i < a->parameters().size(); ++i) b->parameters()[i].copy_(a->parameters()[i]);
    }
    auto oa = make_adamw(*a, tc), ob = make_adamw(*b, tc);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < a->parameters().size(); ++i) {
        auto g = torch::randn_like(a->parameters()[i]) * scale;
        a->parameters()[i].mutable_grad() = g.clone();
        b->parameters()[i].mutable_grad() = g.clone();
      }
      const double na = torch::nn::utils::clip_grad_norm_(a->parameters(), 1.0);
      oa->step();
      std::vector<torch::Tensor> norms;
      for (const auto& p : b->parameters()) norms.push_back(p.grad().norm(2));
      const auto total = torch::stack(norms).norm(2);
      CHECK(total.item<double>() == na);
      const auto coef = torch::clamp_max(1.0 / (total + 1e-6), 1.0);
      if (coef.item<double>() < 1.0) static_cast<FusedAdamW&>(*ob).set_grad_scale(coef.reciprocal());
      ob->step();
      static_cast<FusedAdamW&>(*ob).set_grad_scale(torch::Tensor());
      for (size_t i = 0; i < a->parameters().size(); ++i) {
        const double diff = (a->parameters()[i] - b->parameters()[i]).abs().max().item<double>();
        if (scale < 1) CHECK(diff == 0.0);  // not clipped: the very same arithmetic
        else CHECK(diff < 1e-7);            // clipped: g / (1/c) against g * c, an ulp apart
        // The gradients the step leaves behind are the clipped ones, as clip_grad_norm_ leaves them.
        CHECK((a->parameters()[i].grad() - b->parameters()[i].grad()).abs().max().item<double>() < 1e-6 * scale);
      }
    }
  }
}
