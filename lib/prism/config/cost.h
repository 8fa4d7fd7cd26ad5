#pragma once
// Parameters and FLOPs of a GPT shape under a head schedule, computed from the
// shape alone (no model is built), so the paper's 757M model can be inspected
// on a laptop. They agree exactly with GPTImpl::num_params (tested).
#include <cstdint>
#include <vector>

#include "prism/config/model_config.h"
#include "prism/schedule/head_schedule.h"

namespace prism {

struct LayerCost {
  int heads = 0;
  int head_dim = 0;
  int64_t params = 0;            // the block's parameters
  double matmul_flops = 0;       // forward FLOPs per token in the block's weight matmuls
  double attention_flops = 0;    // forward FLOPs per token in QK^T and PV at context T (full, as nanoGPT counts)
  double score_elements = 0;     // attention scores per token (h_l * T): softmax work, the one head-dependent term
  bool tensor_core_aligned = false;  // head_dim a multiple of 16 and a power of two
};

struct ModelCost {
  std::vector<LayerCost> layers;
  int64_t params = 0;                  // all parameters, LM head tied
  int64_t params_without_positions = 0;// nanoGPT's non-embedding-position count
  double forward_flops_per_token = 0;  // matmuls + attention + LM head
  double train_flops_per_token = 0;    // 3x forward (forward + backward)
};

ModelCost model_cost(const ModelConfig& cfg, const HeadSchedule& schedule, int context = 0 /* 0: block_size */);

}  // namespace prism
