#include "prism/config/cost.h"

namespace prism {

ModelCost model_cost(const ModelConfig& cfg, const HeadSchedule& schedule, int context) {
  const int64_t d = cfg.d_model, V = cfg.vocab_size;
  const int64_t P = cfg.position == Positions::Learned ? cfg.block_size : 0;  // rotary positions: no table
  const double T = context > 0 ? context : cfg.block_size;
  const int64_t b = cfg.bias ? 1 : 0;
  ModelCost c;
  // Per block: ln_1, c_attn (3d^2), c_proj (d^2), ln_2, c_fc (4d^2), mlp c_proj (4d^2).
  const int64_t ln = d + b * d;
  const int64_t matmul_weights = 3 * d * d + d * d + 4 * d * d + 4 * d * d;
  const int64_t block_params = 2 * ln + matmul_weights + b * (3 * d + d + 4 * d + d);
  for (int l = 0; l < schedule.n_layer(); ++l) {
    LayerCost lc;
    lc.heads = schedule[l];
    lc.head_dim = lc.heads > 0 ? static_cast<int>(d / lc.heads) : 0;
    lc.params = block_params;
    lc.matmul_flops = 2.0 * static_cast<double>(matmul_weights);
    lc.attention_flops = 2.0 * 2.0 * T * static_cast<double>(d);  // QK^T and PV: h * d_h = d whatever h is
    lc.score_elements = static_cast<double>(lc.heads) * T;
    lc.tensor_core_aligned = lc.head_dim % 16 == 0 && (lc.head_dim & (lc.head_dim - 1)) == 0;
    c.layers.push_back(lc);
    c.params += lc.params;
    c.forward_flops_per_token += lc.matmul_flops + lc.attention_flops;
  }
  c.params += V * d + P * d + ln;  // wte (shared with the LM head), wpe (learned positions), ln_f
  c.params_without_positions = c.params - P * d;
  c.forward_flops_per_token += 2.0 * static_cast<double>(d * V);  // LM head
  c.train_flops_per_token = 3.0 * c.forward_flops_per_token;
  return c;
}

}  // namespace prism
