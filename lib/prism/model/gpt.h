#pragma once
// The GPT-2 architecture with one difference: every CausalSelfAttention takes
// its own head count from the HeadSchedule (PAPER.md). Parameter names follow
// nanoGPT (wte, wpe, h.N.attn.c_attn, ..., ln_f); they are the checkpoint keys.
// Positions are learned (wpe, GPT-2's) or rotary (model.position: rope): then
// there is no wpe, and each layer rotates its q and k at its own head width
// before the attention op, whichever back end runs it.
// A layer's W_Q, W_K, W_V and W_O are d_model x d_model whatever its head count,
// so one set of weights runs exactly under any schedule a call names
// (ForwardOptions::heads): the weight-sharing schedule search (search/) uses that.
#include <torch/torch.h>

#include <map>
#include <optional>
#include <vector>

#include "prism/ops/attention.h"
#include "prism/ops/add_layer_norm.h"
#include "prism/ops/rope.h"
#include "prism/config/model_config.h"
#include "prism/model/working_copies.h"
#include "prism/schedule/head_schedule.h"

namespace prism {

// LayerNorm with an optional bias (LibTorch's has no switch for the bias alone).
// add_norm adds a residual first and normalises the sum, in one
// pass on the CPU (add_layer_norm.h); under CPU autocast the normalised output
// is already bf16, the next matmul's dtype.
class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t d, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  AddNorm add_norm(const torch::Tensor& x, const torch::Tensor& r);  // {x + r, LayerNorm(x + r)}
  torch::Tensor weight, bias;
};
TORCH_MODULE(LayerNorm);

// A pass's rotary tables by head width: layers (and a mixture's counts) of one width share one.
using RopeTables = std::map<int64_t, RopeTable>;

// How one layer's attention splits q, k and v into heads in one call: one count,
// or a mixture of counts (the attention outputs under each, weighted and summed
// before W_O; W_O is linear, so this is the weighted sum of the layer's outputs).
struct LayerHeads {
  std::vector<int> counts;  // one count, or a mixture's candidates; each divides d_model
  torch::Tensor weights;    // a mixture's (counts.size(),) weights, differentiable; undefined for one count
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const ModelConfig& cfg, int n_head);
  // x: (B, T, C), split into `heads`. rope: the call's rotary tables by head width, or
  // null for learned positions. When `distance` is given (one count only), it receives
  // sum_j p_ij (i - j) as (B, count, T).
  // copies: the training step's bf16 working copies of the matmul weights, or null (the masters).
  torch::Tensor forward(const torch::Tensor& x, const attention::Options& attn, const LayerHeads& heads,
                        const RopeTables* rope = nullptr, torch::Tensor* distance = nullptr,
                        WorkingCopies* copies = nullptr);

  int n_head, head_dim;  // the layer's own count (the model's schedule) and its width
  double dropout;
  torch::nn::Linear c_attn{nullptr};  // fused W_Q, W_K, W_V: d_model -> 3 d_model, whatever n_head is
  torch::nn::Linear c_proj{nullptr};  // W_O: d_model -> d_model
  torch::nn::Dropout resid_dropout{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, WorkingCopies* copies = nullptr);

  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(MLP);

// The residual stream between blocks: x, and the last block's MLP output r not
// yet added to it (the next LayerNorm adds it; r undefined before the first block).
struct Residual {
  torch::Tensor x, r;
};

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& cfg, int n_head);
  // nanoGPT's x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)), with each add done by the LayerNorm after it.
  Residual forward(const Residual& in, const attention::Options& attn, const LayerHeads& heads,
                   const RopeTables* rope = nullptr, torch::Tensor* distance = nullptr,
                   WorkingCopies* copies = nullptr);

  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

// The choices of one forward pass; the defaults are nanoGPT's forward. Passed per
// call, so nothing about the model changes between calls (or when a call throws).
struct ForwardOptions {
  // This call's attention back end; unset: the model's own (see GPTImpl::attention_backend).
  std::optional<attention::Backend> backend;
  bool want_distance = false;  // fill GPTOutput::distance
  bool lm_head = true;         // false: stop after the last block (no ln_f, logits or loss)
  // With targets: also GPTOutput::token_loss, each token's cross-entropy, and `loss`
  // their mean (one LM head pass, in row chunks; validation by position).
  bool token_losses = false;
  // This call's heads, one entry per layer; empty: the model's schedule. Any counts
  // that divide d_model run (the paper's rules 2-6 are the schedule's business, not
  // the model's); a mixture cannot report distance.
  std::vector<LayerHeads> heads;
  // The training step's bf16 working copies: each matmul reads a weight's copy in place of
  // its fp32 master (model/working_copies.h); null: the masters (evaluation, fp32, GPUs).
  WorkingCopies* working_copies = nullptr;

  // A pass for attention distances alone: the blocks run, the LM head (more work than
  // every block at GPT-2's vocabulary) does not.
  static ForwardOptions distance_only(std::optional<attention::Backend> backend = std::nullopt);
  // A call under `schedule` instead of the model's own.
  static ForwardOptions under(const HeadSchedule& schedule);
};

struct GPTOutput {
  torch::Tensor logits;                 // (B, T, V), when no targets were given
  torch::Tensor loss;                   // scalar mean cross-entropy, when targets were given (logits are then
                                        // not materialised: see lm_loss.h)
  torch::Tensor token_loss;             // (B, T) fp32, with ForwardOptions::token_losses: -log p(target) per
                                        // token, 0 where the target is ignored (< 0)
  std::vector<torch::Tensor> distance;  // per layer (B, h_l, T), when requested
};

class GPTImpl : public torch::nn::Module {
 public:
  // Throws prism::Error if the model cannot run the schedule: a count that does not
  // divide d_model, or another number of layers (rule 1; rules 2-3 are checked
  // where a schedule is chosen: config/schedule_section.h).
  // `backend` is the attention back end of calls that name none (attention.backend).
  GPTImpl(const ModelConfig& cfg, const HeadSchedule& schedule,
          attention::Backend backend = attention::Backend::Auto);

  // idx, targets: (B, T) int64 token ids; targets < 0 are ignored. T <= block_size
  // with learned positions (the table has block_size rows); any T with rotary ones.
  // Throws prism::Error for T > block_size with learned positions, targets with
  // options.lm_head off, or options.heads the model cannot run (see LayerHeads).
  GPTOutput forward(const torch::Tensor& idx, const torch::Tensor& targets = {}, const ForwardOptions& options = {});

  // The back end a call's attention runs on: the call's, else the model's; a
  // distance pass on a default that cannot report distance (sdpa) goes to auto.
  attention::Backend attention_backend(const ForwardOptions& options = {}) const;
  // What that back end resolves to in each layer for (1, T) inputs on the model's
  // device and dtype (attention::resolve_backend; throws as it does).
  std::vector<attention::Backend> resolved_backends(int64_t T, const ForwardOptions& options = {}) const;

  // nanoGPT's count: every parameter once (the tied LM head shares wte), optionally
  // without the position table (a rotary model has none).
  int64_t num_params(bool include_position_table = true) const;
  // Registers the model's bf16 working copies (working_copies.h): every Linear
  // weight and the token embedding the LM head reads.
  void add_working_copies(WorkingCopies& copies);

  const ModelConfig& config() const { return cfg_; }
  const HeadSchedule& schedule() const { return schedule_; }

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};  // wpe: learned positions only
  torch::nn::Dropout drop{nullptr};
  torch::nn::ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};

 private:
  void init_weights();
  // The heads of every layer in this call: options.heads checked, or the schedule's.
  std::vector<LayerHeads> call_heads(const ForwardOptions& options) const;
  // The rotary tables of a T-token pass, one per head width in `heads` (none with learned positions).
  RopeTables rope_tables(int64_t T, const torch::Device& device, const std::vector<LayerHeads>& heads) const;
  ModelConfig cfg_;
  HeadSchedule schedule_;
  attention::Backend backend_;
};
TORCH_MODULE(GPT);

}  // namespace prism
