#include "prism/model/gpt.h"

#include <fmt/format.h>

#include <cmath>

#include "prism/error.h"
#include "prism/ops/bias_gelu.h"
#include "prism/ops/lm_loss.h"
#include "prism/schedule/rules.h"

namespace prism {

namespace F = torch::nn::functional;

namespace {
torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// y = x W^T + b through ATen's linear: one addmm with the bias for any batch
// shape (under autocast, one bf16 addmm). The C++ frontend's Linear::forward
// does a matmul and then adds the bias over the whole output in a second pass,
// a mixed-dtype one under autocast (fp32 bias into bf16 output).
// With a training step's bf16 working copies, the weight is its bf16 copy.
torch::Tensor affine(const torch::nn::Linear& l, const torch::Tensor& x, WorkingCopies* copies) {
  return torch::linear(x, working_weight(copies, l->weight), l->bias);
}
}  // namespace

LayerNormImpl::LayerNormImpl(int64_t d, bool bias) {
  weight = register_parameter("weight", torch::ones({d}));
  if (bias) this->bias = register_parameter("bias", torch::zeros({d}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) { return add_norm(x, torch::Tensor()).normed; }

AddNorm LayerNormImpl::add_norm(const torch::Tensor& x, const torch::Tensor& r) {
  return add_layer_norm(x, r, weight, bias, 1e-5);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& cfg, int n_head_)
    : n_head(n_head_), head_dim(cfg.d_model / n_head_), dropout(cfg.dropout) {
  c_attn = register_module("c_attn", linear(cfg.d_model, 3 * cfg.d_model, cfg.bias));
  c_proj = register_module("c_proj", linear(cfg.d_model, cfg.d_model, cfg.bias));
  resid_dropout = register_module("resid_dropout", torch::nn::Dropout(cfg.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const attention::Options& attn,
                                               const LayerHeads& heads, const RopeTables* rope,
                                               torch::Tensor* distance, WorkingCopies* copies) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const auto qkv = affine(c_attn, x, copies);
  attention::Options opt = attn;
  opt.dropout_p = is_training() ? dropout : 0.0;
  opt.want_distance = distance != nullptr;
  // The same q, k and v sliced into `count` heads: (B, T, 3, H, D), strided views, no
  // copies; with rotary positions q and k are rotated at that head width.
  auto attend = [&](int count) {
    auto split = qkv.view({B, T, 3, count, C / count});
    auto q = split.select(2, 0), k = split.select(2, 1);
    if (rope) {
      RotatedQK r = apply_rope(q, k, rope->at(C / count));
      q = r.q;
      k = r.k;
    }
    auto res = attention::causal_attention(q, k, split.select(2, 2), opt);
    if (distance) *distance = res.distance;
    return res.out.reshape({B, T, C});
  };
  torch::Tensor y = attend(heads.counts[0]);
  if (heads.counts.size() > 1) {
    y = y * heads.weights[0];
    for (size_t k = 1; k < heads.counts.size(); ++k) y = y + attend(heads.counts[k]) * heads.weights[static_cast<int64_t>(k)];
  }
  return resid_dropout(affine(c_proj, y, copies));
}

MLPImpl::MLPImpl(const ModelConfig& cfg) {
  c_fc = register_module("c_fc", linear(cfg.d_model, 4 * cfg.d_model, cfg.bias));
  c_proj = register_module("c_proj", linear(4 * cfg.d_model, cfg.d_model, cfg.bias));
  dropout = register_module("dropout", torch::nn::Dropout(cfg.dropout));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x, WorkingCopies* copies) {
  // GPT-2's GELU is the tanh approximation; on the CPU the bias and GELU are one fused pass.
  return dropout(affine(c_proj, linear_gelu(x, working_weight(copies, c_fc->weight), c_fc->bias), copies));
}

BlockImpl::BlockImpl(const ModelConfig& cfg, int n_head) {
  ln_1 = register_module("ln_1", LayerNorm(cfg.d_model, cfg.bias));
  attn = register_module("attn", CausalSelfAttention(cfg, n_head));
  ln_2 = register_module("ln_2", LayerNorm(cfg.d_model, cfg.bias));
  mlp = register_module("mlp", MLP(cfg));
}

Residual BlockImpl::forward(const Residual& in, const attention::Options& a, const LayerHeads& heads,
                            const RopeTables* rope, torch::Tensor* distance, WorkingCopies* copies) {
  auto [x, normed_1] = ln_1->add_norm(in.x, in.r);  // x = in.x + in.r
  auto [y, normed_2] = ln_2->add_norm(x, attn(normed_1, a, heads, rope, distance, copies));  // y = x + attn(ln_1(x))
  return {y, mlp(normed_2, copies)};  // the next LayerNorm adds y + mlp(ln_2(y))
}

ForwardOptions ForwardOptions::distance_only(std::optional<attention::Backend> backend) {
  ForwardOptions o;
  o.backend = backend;
  o.want_distance = true;
  o.lm_head = false;
  return o;
}

ForwardOptions ForwardOptions::under(const HeadSchedule& schedule) {
  ForwardOptions o;
  for (int h : schedule.heads()) o.heads.push_back({{h}, {}});
  return o;
}

GPTImpl::GPTImpl(const ModelConfig& cfg, const HeadSchedule& schedule, attention::Backend backend)
    : cfg_(cfg), schedule_(schedule), backend_(backend) {
  validate_model_config(cfg, "model");
  require_runnable_schedule(schedule, cfg.n_layer, cfg.d_model, "model schedule");
  require_rope_head_widths(cfg, schedule.heads(), "model schedule");
  wte = register_module("wte", torch::nn::Embedding(cfg.vocab_size, cfg.d_model));
  if (cfg.position == Positions::Learned)
    wpe = register_module("wpe", torch::nn::Embedding(cfg.block_size, cfg.d_model));
  drop = register_module("drop", torch::nn::Dropout(cfg.dropout));
  h = register_module("h", torch::nn::ModuleList());
  for (int l = 0; l < cfg.n_layer; ++l) h->push_back(Block(cfg, schedule[l]));
  ln_f = register_module("ln_f", LayerNorm(cfg.d_model, cfg.bias));
  init_weights();
}

void GPTImpl::init_weights() {
  torch::NoGradGuard no_grad;
  // GPT-2: N(0, 0.02) everywhere, residual projections scaled by 1/sqrt(2 L).
  const double proj_std = 0.02 / std::sqrt(2.0 * cfg_.n_layer);
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    auto ends_with = [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (name.find("ln_") != std::string::npos) {
      if (ends_with("weight")) p.fill_(1.0); else p.zero_();
    } else if (ends_with("bias")) {
      p.zero_();
    } else if (ends_with("c_proj.weight")) {
      p.normal_(0.0, proj_std);
    } else {
      p.normal_(0.0, 0.02);
    }
  }
}

attention::Backend GPTImpl::attention_backend(const ForwardOptions& options) const {
  if (options.backend) return *options.backend;
  if (options.want_distance && !attention::supports_distance(backend_)) return attention::Backend::Auto;
  return backend_;
}

std::vector<attention::Backend> GPTImpl::resolved_backends(int64_t T, const ForwardOptions& options) const {
  attention::Options a;
  a.backend = attention_backend(options);
  a.want_distance = options.want_distance;
  const auto like = wte->weight.options();
  std::vector<attention::Backend> out;
  for (int h : schedule_.heads())
    out.push_back(attention::resolve_backend(a, torch::empty({1, T, h, cfg_.d_model / h}, like)));
  return out;
}

RopeTables GPTImpl::rope_tables(int64_t T, const torch::Device& device, const std::vector<LayerHeads>& heads) const {
  RopeTables tables;
  if (cfg_.position != Positions::Rope) return tables;
  for (const LayerHeads& layer : heads)
    for (int h : layer.counts) {
      const int64_t d = cfg_.d_model / h;
      if (!tables.count(d)) tables.emplace(d, rope_table(T, d, cfg_.rope_theta, device));
    }
  return tables;
}

GPTOutput GPTImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets, const ForwardOptions& options) {
  const int64_t T = idx.size(1);
  if (T > cfg_.block_size && cfg_.position == Positions::Learned)
    throw Error(fmt::format("sequence length {} exceeds the model's block_size {}", T, cfg_.block_size), "model forward",
                "use a context of at most model.block_size tokens");
  if (targets.defined() && !options.lm_head)
    throw Error("targets given to a forward pass without the LM head", "model forward",
                "pass no targets with ForwardOptions::lm_head off, or leave the LM head on");
  attention::Options attn;
  attn.backend = attention_backend(options);
  // On the CPU the token embedding's gradient is sparse (the batch's rows only):
  // the autograd engine adds it in place into the tied LM head's dense gradient,
  // where a dense embedding backward would zero and sum a whole (V, d) table.
  auto tok = torch::embedding(wte->weight, idx, /*padding_idx=*/-1, /*scale_grad_by_freq=*/false,
                              /*sparse=*/idx.device().is_cpu());
  if (wpe) tok = tok + wpe(torch::arange(T, torch::dtype(torch::kLong).device(idx.device())));
  Residual s{drop(tok), torch::Tensor()};
  const std::vector<LayerHeads> heads = call_heads(options);
  // One rotary table per head width the call runs, shared by the layers (and a mixture's counts) of that width.
  const RopeTables tables = rope_tables(T, idx.device(), heads);
  const RopeTables* rope = cfg_.position == Positions::Rope ? &tables : nullptr;
  GPTOutput out;
  if (options.want_distance) out.distance.resize(h->size());
  for (size_t l = 0; l < h->size(); ++l)
    s = h[l]->as<Block>()->forward(s, attn, heads[l], rope, options.want_distance ? &out.distance[l] : nullptr,
                                   options.working_copies);
  if (!options.lm_head) return out;
  auto x = ln_f->add_norm(s.x, s.r).normed;
  if (targets.defined() && options.token_losses) {
    out.token_loss = lm_head_token_losses(x.reshape({-1, x.size(-1)}), working_weight(options.working_copies, wte->weight),
                                          targets.reshape({-1}))
                         .view(targets.sizes());
    out.loss = out.token_loss.sum() / (targets >= 0).sum().clamp_min(1).to(torch::kFloat);
  } else if (targets.defined()) {
    // LM head (tied to the token embedding) and loss, by the path that suits the device (lm_loss.h).
    out.loss = lm_head_loss(x.reshape({-1, x.size(-1)}), working_weight(options.working_copies, wte->weight), targets.reshape({-1}));
  } else {
    out.logits = F::linear(x, wte->weight);
  }
  return out;
}

std::vector<LayerHeads> GPTImpl::call_heads(const ForwardOptions& options) const {
  const int L = cfg_.n_layer;
  if (options.heads.empty()) {
    std::vector<LayerHeads> own;
    for (int c : schedule_.heads()) own.push_back({{c}, {}});
    return own;
  }
  const std::string where = "model forward (ForwardOptions::heads)";
  if (static_cast<int>(options.heads.size()) != L)
    throw Error(fmt::format("heads for {} layers given to a model of {}", options.heads.size(), L), where,
                "give one entry per layer");
  for (int l = 0; l < L; ++l) {
    const LayerHeads& lh = options.heads[static_cast<size_t>(l)];
    if (lh.counts.empty()) throw Error(fmt::format("layer {} has no head count", l), where, "give at least one count");
    for (int c : lh.counts)
      if (c <= 0 || cfg_.d_model % c != 0)
        throw Error(fmt::format("layer {}: {} heads do not divide d_model = {}", l, c, cfg_.d_model), where,
                    "use head counts that divide d_model");
    if (lh.counts.size() > 1 && (!lh.weights.defined() || lh.weights.numel() != static_cast<int64_t>(lh.counts.size())))
      throw Error(fmt::format("layer {}: a mixture of {} counts needs {} weights", l, lh.counts.size(), lh.counts.size()),
                  where, "give LayerHeads::weights one weight per count");
    if (lh.counts.size() > 1 && options.want_distance)
      throw Error(fmt::format("layer {}: attention distance of a mixture of head counts", l), where,
                  "measure distance under one count per layer");
  }
  // Rotary positions need even head widths: each count checked at its layer (0 = no count there).
  for (int l = 0; l < L; ++l)
    for (int c : options.heads[static_cast<size_t>(l)].counts) {
      std::vector<int> at_layer(static_cast<size_t>(L), 0);
      at_layer[static_cast<size_t>(l)] = c;
      require_rope_head_widths(cfg_, at_layer, where);
    }
  return options.heads;
}

void GPTImpl::add_working_copies(WorkingCopies& copies) {
  for (auto& m : modules(/*include_self=*/false))
    if (auto* l = m->as<torch::nn::Linear>()) copies.add(l->weight);
  copies.add(wte->weight, /*master_read=*/true);  // the LM head's operand; the lookup reads the master
}

int64_t GPTImpl::num_params(bool include_position_table) const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  if (!include_position_table && wpe) n -= wpe->weight.numel();
  return n;
}

}  // namespace prism
