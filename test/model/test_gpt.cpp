#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "prism/config/cost.h"
#include "prism/error.h"
#include "prism/model/gpt.h"

using namespace prism;

namespace {
ModelConfig tiny() { return model_preset("test-tiny"); }  // 2 x 64, 4 heads, T 32, V 512
}  // namespace

TEST_CASE("GPT forward gives (B, T, V) logits and a scalar loss", "[model]") {
  torch::manual_seed(0);
  GPT m(tiny(), HeadSchedule::parse("2,4"));
  auto idx = torch::randint(0, 512, {3, 17}, torch::kLong);
  auto targets = torch::randint(0, 512, {3, 17}, torch::kLong);
  auto out = m->forward(idx, targets);
  CHECK_FALSE(out.logits.defined());  // the fused LM-head loss never materialises them
  CHECK(m->forward(idx).logits.sizes() == torch::IntArrayRef({3, 17, 512}));
  CHECK(out.loss.dim() == 0);
  // Fresh GPT-2 init predicts close to uniform: loss near ln(V).
  CHECK(out.loss.item<double>() == Approx(std::log(512.0)).margin(0.3));
  CHECK_FALSE(m->forward(idx).loss.defined());
  CHECK_FALSE(out.token_loss.defined());
  // Per-token losses on request: (B, T), each the cross-entropy of its logits, their mean the loss.
  ForwardOptions per_token;
  per_token.token_losses = true;
  auto each = m->forward(idx, targets, per_token);
  REQUIRE(each.token_loss.sizes() == torch::IntArrayRef({3, 17}));
  auto logits = m->forward(idx).logits;
  auto want = torch::nn::functional::cross_entropy(
                  logits.reshape({-1, 512}), targets.reshape({-1}),
                  torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
                  .view({3, 17});
  CHECK(torch::allclose(each.token_loss, want, 1e-5, 1e-5));
  CHECK(each.loss.item<double>() == Approx(out.loss.item<double>()).epsilon(1e-6));
}

TEST_CASE("each attention layer uses its scheduled head count", "[model]") {
  GPT m(tiny(), HeadSchedule::parse("2,4"));
  auto a0 = m->h[0]->as<Block>()->attn;
  auto a1 = m->h[1]->as<Block>()->attn;
  CHECK(a0->n_head == 2);
  CHECK(a0->head_dim == 32);
  CHECK(a1->n_head == 4);
  CHECK(a1->head_dim == 16);
  // W_Q, W_K, W_V, W_O stay d_model x d_model whatever the head count.
  CHECK(a0->c_attn->weight.sizes() == a1->c_attn->weight.sizes());
  CHECK(a0->c_proj->weight.sizes() == torch::IntArrayRef({64, 64}));
  ForwardOptions with_distance;
  with_distance.want_distance = true;
  auto out = m->forward(torch::zeros({1, 5}, torch::kLong), {}, with_distance);
  REQUIRE(out.distance.size() == 2);
  CHECK(out.distance[0].sizes() == torch::IntArrayRef({1, 2, 5}));
  CHECK(out.distance[1].sizes() == torch::IntArrayRef({1, 4, 5}));
}

TEST_CASE("per-call options: a call's back end and outputs, the model unchanged by any call", "[model][forward]") {
  using attention::Backend;
  torch::manual_seed(4);
  GPT m(tiny(), HeadSchedule::parse("2,4"), Backend::Sdpa);  // attention.backend: sdpa, which has no distance
  m->eval();
  torch::NoGradGuard ng;
  auto idx = torch::randint(0, 512, {2, 13}, torch::kLong);
  ForwardOptions plain, reference, with_distance;
  reference.backend = Backend::Reference;
  with_distance.want_distance = true;
  // Calls that name no back end use the model's; a distance pass on sdpa goes to auto.
  CHECK(m->attention_backend() == Backend::Sdpa);
  CHECK(m->attention_backend(reference) == Backend::Reference);
  CHECK(m->attention_backend(with_distance) == Backend::Auto);
  // (Parenthesised: Catch cannot print a vector of back ends.)
  CHECK((m->resolved_backends(13, reference) == std::vector<Backend>{Backend::Reference, Backend::Reference}));
  CHECK((m->resolved_backends(13) == std::vector<Backend>{Backend::Sdpa, Backend::Sdpa}));
  // A call that fails (sdpa cannot report distance) leaves nothing changed behind it.
  ForwardOptions sdpa_distance = with_distance;
  sdpa_distance.backend = Backend::Sdpa;
  CHECK_THROWS_WITH(m->forward(idx, {}, sdpa_distance), Catch::Contains("cannot report attention distance"));
  CHECK(m->attention_backend() == Backend::Sdpa);
  // The same logits whichever back end a call takes (sdpa by default, the reference by request).
  auto by_default = m->forward(idx, {}, plain).logits;
  auto by_reference = m->forward(idx, {}, reference).logits;
  CHECK(torch::allclose(by_default, by_reference, 1e-5, 1e-5));
  // A distance-only pass: the same distances as the whole forward, and no LM head.
  auto whole = m->forward(idx, {}, with_distance);
  auto blocks = m->forward(idx, {}, ForwardOptions::distance_only());
  CHECK(whole.logits.sizes() == torch::IntArrayRef({2, 13, 512}));
  CHECK_FALSE(blocks.logits.defined());
  CHECK_FALSE(blocks.loss.defined());
  REQUIRE(blocks.distance.size() == whole.distance.size());
  for (size_t l = 0; l < blocks.distance.size(); ++l) CHECK(torch::equal(blocks.distance[l], whole.distance[l]));
  auto ref_blocks = m->forward(idx, {}, ForwardOptions::distance_only(Backend::Reference));
  for (size_t l = 0; l < blocks.distance.size(); ++l)
    CHECK(torch::allclose(ref_blocks.distance[l], whole.distance[l], 1e-4, 1e-4));
  // Targets need the LM head.
  CHECK_THROWS_WITH(m->forward(idx, idx, ForwardOptions::distance_only()), Catch::Contains("without the LM head"));
}

TEST_CASE("parameter names are nanoGPT's and the LM head is tied", "[model]") {
  GPT m(tiny(), HeadSchedule::uniform(2, 4));
  auto params = m->named_parameters();
  for (const char* name : {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight",
                           "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.1.mlp.c_fc.weight",
                           "h.1.mlp.c_proj.bias", "ln_f.weight", "ln_f.bias"}) {
    INFO(name);
    CHECK(params.contains(name));
  }
  CHECK_FALSE(params.contains("lm_head.weight"));
  ModelConfig nb = tiny();
  nb.bias = false;
  GPT m2(nb, HeadSchedule::uniform(2, 4));
  CHECK_FALSE(m2->named_parameters().contains("h.0.ln_1.bias"));
  CHECK_FALSE(m2->named_parameters().contains("h.0.attn.c_attn.bias"));
}

TEST_CASE("GPT-2 initialisation scales the residual projections", "[model]") {
  torch::manual_seed(1);
  ModelConfig cfg = model_preset("cpu-256");  // 8 layers: proj std 0.02 / 4 = 0.005
  GPT m(cfg, HeadSchedule::uniform(8, 8));
  auto p = m->named_parameters();
  CHECK(p["h.3.attn.c_proj.weight"].std().item<double>() == Approx(0.005).epsilon(0.05));
  CHECK(p["h.3.mlp.c_proj.weight"].std().item<double>() == Approx(0.005).epsilon(0.05));
  CHECK(p["h.3.mlp.c_fc.weight"].std().item<double>() == Approx(0.02).epsilon(0.05));
  CHECK(p["wte.weight"].std().item<double>() == Approx(0.02).epsilon(0.05));
  CHECK(p["h.3.mlp.c_fc.bias"].abs().max().item<double>() == 0.0);
  CHECK(p["h.3.ln_2.weight"].min().item<double>() == 1.0);
}

TEST_CASE("causality: changing a future token leaves earlier logits unchanged", "[model]") {
  torch::manual_seed(2);
  for (const char* sched : {"4,4", "2,4", "1,4"}) {
    INFO(sched);
    GPT m(tiny(), HeadSchedule::parse(sched));
    m->eval();
    auto idx = torch::randint(0, 512, {2, 20}, torch::kLong);
    auto idx2 = idx.clone();
    idx2.index_put_({torch::indexing::Slice(), 12}, (idx.index({torch::indexing::Slice(), 12}) + 7) % 512);
    auto a = m->forward(idx).logits, b = m->forward(idx2).logits;
    using torch::indexing::Slice;
    CHECK(torch::equal(a.index({Slice(), Slice(0, 12)}), b.index({Slice(), Slice(0, 12)})));
    CHECK_FALSE(torch::allclose(a.index({Slice(), 12}), b.index({Slice(), 12})));
  }
}

TEST_CASE("a schedule the model cannot run cannot build it, rules 2-3 are the config's", "[model]") {
  CHECK_THROWS_WITH(GPT(tiny(), HeadSchedule::parse("3,4")), Catch::Contains("rule 1"));
  CHECK_THROWS_WITH(GPT(tiny(), HeadSchedule::parse("4,4,4")), Catch::Contains("3 layers"));
  // Decreasing, or ending wide: the model runs them (a study of such schedules relaxes the config's rules).
  CHECK_NOTHROW(GPT(tiny(), HeadSchedule::parse("4,2")));
  CHECK_NOTHROW(GPT(tiny(), HeadSchedule::parse("1,1")));
  GPT m(tiny(), HeadSchedule::uniform(2, 4));
  CHECK_THROWS_WITH(m->forward(torch::zeros({1, 33}, torch::kLong)), Catch::Contains("block_size"));
}

namespace {
void copy_weights(GPT& from, GPT& to) {
  torch::NoGradGuard ng;
  auto src = from->named_parameters();
  for (auto& p : to->named_parameters()) p.value().copy_(src[p.key()]);
}
}  // namespace

TEST_CASE("one model runs any schedule per call, exactly as a model built with that schedule", "[model][heads]") {
  // W_Q, W_K, W_V, W_O do not depend on the head count: the same weights, sliced otherwise.
  torch::manual_seed(1);
  GPT shared(tiny(), HeadSchedule::uniform(2, 4));
  auto idx = torch::randint(0, 512, {2, 19}, torch::kLong), targets = torch::randint(0, 512, {2, 19}, torch::kLong);
  shared->eval();
  const auto before = shared->forward(idx).logits;
  for (const char* text : {"1,4", "4,1", "8,2", "2,2", "16,64"}) {
    INFO(text);
    const HeadSchedule s = HeadSchedule::parse(text);
    GPT own(tiny(), s);
    copy_weights(shared, own);
    own->eval();
    CHECK(torch::equal(shared->forward(idx, {}, ForwardOptions::under(s)).logits, own->forward(idx).logits));
    // The loss and every gradient too.
    shared->zero_grad();
    own->zero_grad();
    shared->forward(idx, targets, ForwardOptions::under(s)).loss.backward();
    own->forward(idx, targets).loss.backward();
    auto own_params = own->named_parameters();
    for (const auto& p : shared->named_parameters()) {
      INFO(p.key());
      CHECK(torch::allclose(p.value().grad().to_dense(), own_params[p.key()].grad().to_dense(), 1e-6, 1e-7));
    }
  }
  // The model is what it was: its own schedule, the same outputs.
  CHECK(shared->schedule() == HeadSchedule::uniform(2, 4));
  CHECK(torch::equal(shared->forward(idx).logits, before));
}

TEST_CASE("a mixture of head counts is the weighted sum of the layer's outputs, differentiable in the weights",
          "[model][heads]") {
  torch::manual_seed(2);
  GPT m(tiny(), HeadSchedule::uniform(2, 4));
  m->to(torch::kDouble);
  m->eval();
  auto idx = torch::randint(0, 512, {2, 11}, torch::kLong), targets = torch::randint(0, 512, {2, 11}, torch::kLong);
  const std::vector<int> counts{1, 2, 4};
  auto mixture = [&](const torch::Tensor& w0) {
    ForwardOptions o;
    o.heads = {{counts, w0}, {{4}, {}}};
    return o;
  };
  // One-hot weights are that count's schedule exactly.
  const auto onehot = torch::tensor({0.0, 1.0, 0.0}, torch::kDouble);
  CHECK(torch::equal(m->forward(idx, {}, mixture(onehot)).logits,
                     m->forward(idx, {}, ForwardOptions::under(HeadSchedule::parse("2,4"))).logits));
  // d loss / d w against central differences, all in double: the cross-entropy of the
  // logits here (the model's own loss path may reduce in fp32, too coarse for a
  // difference quotient).
  auto loss_of = [&](const torch::Tensor& weights) {
    const auto logits = m->forward(idx, {}, mixture(weights)).logits;
    REQUIRE(logits.scalar_type() == torch::kDouble);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  };
  auto w = torch::tensor({0.2, 0.3, 0.5}, torch::kDouble).requires_grad_(true);
  loss_of(w).backward();
  torch::NoGradGuard ng;
  for (int64_t k = 0; k < 3; ++k) {
    auto up = w.detach().clone(), down = w.detach().clone();
    up[k] += 1e-6;
    down[k] -= 1e-6;
    const double numeric = (loss_of(up).item<double>() - loss_of(down).item<double>()) / 2e-6;
    INFO("weight " << k);
    CHECK(w.grad()[k].item<double>() == Approx(numeric).epsilon(1e-5));
  }
}

TEST_CASE("per-call heads the model cannot run are refused with the layer named", "[model][heads]") {
  GPT m(tiny(), HeadSchedule::uniform(2, 4));
  auto idx = torch::zeros({1, 5}, torch::kLong);
  ForwardOptions o;
  o.heads = {{{3}, {}}, {{4}, {}}};
  CHECK_THROWS_WITH(m->forward(idx, {}, o), Catch::Contains("layer 0: 3 heads do not divide d_model = 64"));
  o.heads = {{{4}, {}}};
  CHECK_THROWS_WITH(m->forward(idx, {}, o), Catch::Contains("heads for 1 layers"));
  o.heads = {{{1, 4}, {}}, {{4}, {}}};
  CHECK_THROWS_WITH(m->forward(idx, {}, o), Catch::Contains("needs 2 weights"));
  o.heads = {{{1, 4}, torch::tensor({0.5, 0.5})}, {{4}, {}}};
  o.want_distance = true;
  CHECK_THROWS_WITH(m->forward(idx, {}, o), Catch::Contains("distance of a mixture"));
}

TEST_CASE("parameters are identical for every valid schedule of a shape", "[model][neutrality]") {
  ModelConfig cfg = model_preset("cpu-256");
  int64_t uniform = GPT(cfg, HeadSchedule::uniform(8, 8))->num_params();
  for (const char* s : {"2x2,4x2,8x4", "1x2,8x6", "4x4,8x4", "2x3,8x5"}) {
    INFO(s);
    auto hs = HeadSchedule::parse(s);
    GPT m(cfg, hs);
    CHECK(m->num_params() == uniform);
    CHECK(model_cost(cfg, hs).params == uniform);
  }
}

TEST_CASE("the paper's three shapes: params as nanoGPT reports them, equal across schedules",
          "[model][neutrality]") {
  struct Case {
    const char* preset;
    const char* prism;
    double millions_without_pos;  // PAPER.md
  };
  for (const auto& c : {Case{"gpt2-124m", "3x3,6x3,12x6", 123.7}, Case{"gpt2-354m", "4x4,8x4,16x16", 353.8},
                        Case{"prism-757m", "6x4,12x4,24x16", 757.2}}) {
    INFO(c.preset);
    ModelConfig cfg = model_preset(c.preset);
    auto prism = HeadSchedule::parse(c.prism);
    auto uniform = HeadSchedule::uniform(cfg.n_layer, cfg.n_head);
    auto cp = model_cost(cfg, prism), cu = model_cost(cfg, uniform);
    CHECK(cp.params == cu.params);
    CHECK(cp.forward_flops_per_token == cu.forward_flops_per_token);
    CHECK(std::round(cp.params_without_positions / 1e5) / 10 == Approx(c.millions_without_pos));
    // The analytic count is what the built model has.
    torch::NoGradGuard ng;
    GPT m(cfg, prism);
    CHECK(m->num_params(true) == cp.params);
    CHECK(m->num_params(false) == cp.params_without_positions);
  }
  // GPT-2 small, exactly: 124,439,808 with the 1024 x 768 position table.
  CHECK(model_cost(model_preset("gpt2-124m"), HeadSchedule::uniform(12, 12)).params == 124439808);
}

TEST_CASE("rotary positions: no position table, any context, head widths checked", "[model][rope]") {
  torch::manual_seed(8);
  ModelConfig cfg = tiny();
  cfg.position = Positions::Rope;
  GPT rope(cfg, HeadSchedule::parse("2,4"));
  GPT learned(tiny(), HeadSchedule::parse("2,4"));
  CHECK_FALSE(rope->wpe);
  CHECK_FALSE(rope->named_parameters().contains("wpe.weight"));
  // The one difference in parameters is the (block_size, d_model) table; the cost model agrees.
  CHECK(learned->num_params() - rope->num_params() == 32 * 64);
  CHECK(rope->num_params(false) == learned->num_params(false));
  CHECK(model_cost(cfg, HeadSchedule::parse("2,4")).params == rope->num_params());
  // Longer than block_size (32): a rotary model runs it, a learned one has no rows for it.
  auto idx = torch::randint(0, 512, {1, 48}, torch::kLong);
  torch::NoGradGuard ng;
  CHECK(rope->forward(idx).logits.sizes() == torch::IntArrayRef({1, 48, 512}));
  CHECK_THROWS_WITH(learned->forward(idx), Catch::Contains("exceeds the model's block_size 32"));
  // Causal with rotary positions too: a later token leaves earlier logits as they were.
  auto changed = idx.clone();
  changed[0][40] = (idx[0][40].item<int64_t>() + 1) % 512;
  CHECK(torch::allclose(rope->forward(idx).logits.narrow(1, 0, 40), rope->forward(changed).logits.narrow(1, 0, 40),
                        1e-6, 1e-6));
  // A model of odd head widths (64 / 64 = 1) cannot rotate pairs.
  ModelConfig odd = cfg;
  odd.n_head = 64;
  CHECK_THROWS_WITH(GPT(odd, HeadSchedule::parse("64,64")), Catch::Contains("layer 0 has 64 heads of width 1"));
}

TEST_CASE("a rotary model runs any schedule per call as one built with it, each count rotated at its own width",
          "[model][heads][rope]") {
  // The rotary tables of a call are keyed by head width: a call's counts (and a mixture's)
  // need tables the model's own schedule does not have.
  torch::manual_seed(9);
  ModelConfig cfg = tiny();
  cfg.position = Positions::Rope;
  GPT shared(cfg, HeadSchedule::uniform(2, 4));
  shared->eval();
  auto idx = torch::randint(0, 512, {2, 40}, torch::kLong);  // longer than block_size (32): rotary only
  torch::NoGradGuard ng;
  for (const char* text : {"1,4", "8,2", "16,32"}) {
    INFO(text);
    const HeadSchedule s = HeadSchedule::parse(text);
    GPT own(cfg, s);
    copy_weights(shared, own);
    own->eval();
    CHECK(torch::equal(shared->forward(idx, {}, ForwardOptions::under(s)).logits, own->forward(idx).logits));
  }
  // A mixture with one-hot weights is that count's schedule.
  ForwardOptions mix;
  mix.heads = {{{1, 2, 16}, torch::tensor({0.0, 0.0, 1.0})}, {{4}, {}}};
  CHECK(torch::equal(shared->forward(idx, {}, mix).logits,
                     shared->forward(idx, {}, ForwardOptions::under(HeadSchedule::parse("16,4"))).logits));
  // A count whose width is odd cannot rotate pairs: refused at its layer.
  ForwardOptions odd;
  odd.heads = {{{4}, {}}, {{64}, {}}};
  CHECK_THROWS_WITH(shared->forward(idx, {}, odd), Catch::Contains("layer 1 has 64 heads of width 1"));
}
