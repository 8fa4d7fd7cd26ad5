#pragma once
// The `train:` and `data:` sections: optimisation, schedule of the learning
// rate, measurement cadence, checkpoints, and where the token shards are.
#include <cstdint>
#include <string>

namespace prism {

class ConfigNode;

struct TrainConfig {
  uint64_t seed = 0;
  std::string device = "auto";   // auto | cpu | cuda
  int threads = 0;               // intra-op threads; 0 = every core
  int64_t batch_size = 8;        // micro-batch B per process
  int64_t seq_len = 0;           // T, at most model.block_size; 0 = block_size
  int64_t tokens_per_step = 0;   // optimizer step size in tokens; 0 = one micro-batch (B*T)
  int64_t max_steps = 1000;
  double lr = 6e-4;              // peak learning rate
  double min_lr_ratio = 0.1;     // cosine floor = lr * min_lr_ratio
  int64_t warmup_steps = 100;
  std::string decay = "cosine";  // cosine | linear | constant
  double weight_decay = 0.1;     // matrices only (nanoGPT's grouping)
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;        // 0 disables clipping
  std::string dtype = "auto";    // auto | fp32 | bf16 (autocast; fp32 master weights)
  int64_t log_every = 10;
  int64_t eval_every = 100;      // validation loss cadence (0 = only at the end)
  int64_t eval_tokens = 65536;   // size of the fixed held-out set
  int64_t distance_every = 200;  // attention distance cadence (0 = only at the end)
  int64_t distance_batch = 4;    // sequences in the fixed held-out distance batch
  int64_t checkpoint_every = 500;// 0 = only at the end (and on SIGINT, SIGTERM or SIGUSR1)
  // Also a checkpoint once this many minutes of wall clock have passed since the last one
  // (or the start), so a job cut off at its time limit loses at most that much; 0 = off.
  double checkpoint_minutes = 0;
  // Start from these weights instead of a random initialisation: a run directory
  // (its newest checkpoint), a checkpoint directory or a model.safetensors. Any
  // schedule loads any checkpoint of the same width, depth and vocabulary (the
  // head count only slices W_Q, W_K, W_V). Optimizer, step count and data start
  // fresh; "" = random initialisation from train.seed.
  std::string init_from;
};

struct DataConfig {
  std::string dir;               // a prepared corpus: *_val_*.bin and *_train_*.bin shards
  bool shuffle = true;           // random windows (true) or sequential (false) for training
  // The tokenizer's ranks file; "" = the data's own (<dir>/vocab.tiktoken when
  // prepared by prism), else GPT-2's. Filled in when a run starts (dataset.h).
  std::string vocab;
};

TrainConfig parse_train_section(ConfigNode node);
// tokens_per_step must be whole micro-batches (after seq_len is resolved).
void check_tokens_per_step(const TrainConfig& t, const std::string& where);
DataConfig parse_data_section(ConfigNode node);

}  // namespace prism
