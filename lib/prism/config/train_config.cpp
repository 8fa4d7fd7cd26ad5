#include "prism/config/train_config.h"

#include <fmt/format.h>

#include "prism/config/config_node.h"
#include "prism/error.h"

namespace prism {

TrainConfig parse_train_section(ConfigNode n) {
  TrainConfig t;
  constexpr long long kBig = 1LL << 50;
  t.seed = static_cast<uint64_t>(n.get_int("seed", 0, 0, kBig));
  t.device = n.get_choice("device", t.device, {"auto", "cpu", "cuda"});
  t.threads = static_cast<int>(n.get_int("threads", t.threads, 0, 4096));
  t.batch_size = n.get_int("batch_size", t.batch_size, 1, 1 << 20);
  t.seq_len = n.get_int("seq_len", t.seq_len, 0, 1 << 20);
  t.tokens_per_step = n.get_int("tokens_per_step", t.tokens_per_step, 0, kBig);
  t.max_steps = n.get_int("max_steps", t.max_steps, 1, kBig);
  t.lr = n.get_real("lr", t.lr, 0.0, 1e4);
  t.min_lr_ratio = n.get_real("min_lr_ratio", t.min_lr_ratio, 0.0, 1.0);
  t.warmup_steps = n.get_int("warmup_steps", t.warmup_steps, 0, kBig);
  t.decay = n.get_choice("decay", t.decay, {"cosine", "linear", "constant"});
  t.weight_decay = n.get_real("weight_decay", t.weight_decay, 0.0, 10.0);
  t.beta1 = n.get_real("beta1", t.beta1, 0.0, 0.999999);
  t.beta2 = n.get_real("beta2", t.beta2, 0.0, 0.999999);
  t.eps = n.get_real("eps", t.eps, 0.0, 1.0);
  t.grad_clip = n.get_real("grad_clip", t.grad_clip, 0.0, 1e6);
  t.dtype = n.get_choice("dtype", t.dtype, {"auto", "fp32", "bf16"});
  t.log_every = n.get_int("log_every", t.log_every, 1, kBig);
  t.eval_every = n.get_int("eval_every", t.eval_every, 0, kBig);
  t.eval_tokens = n.get_int("eval_tokens", t.eval_tokens, 1, kBig);
  t.distance_every = n.get_int("distance_every", t.distance_every, 0, kBig);
  t.distance_batch = n.get_int("distance_batch", t.distance_batch, 1, 1 << 20);
  t.checkpoint_every = n.get_int("checkpoint_every", t.checkpoint_every, 0, kBig);
  t.checkpoint_minutes = n.get_real("checkpoint_minutes", t.checkpoint_minutes, 0.0, 1e6);
  t.init_from = n.get<std::string>("init_from", t.init_from);
  n.finish();
  return t;
}

void check_tokens_per_step(const TrainConfig& t, const std::string& where) {
  if (t.tokens_per_step > 0 && t.tokens_per_step % (t.batch_size * t.seq_len) != 0)
    throw Error(fmt::format("train.tokens_per_step = {} is not a multiple of batch_size x seq_len = {}",
                            t.tokens_per_step, t.batch_size * t.seq_len),
                where, fmt::format("use a multiple of {} (gradient accumulation runs whole micro-batches)",
                                   t.batch_size * t.seq_len));
}

DataConfig parse_data_section(ConfigNode n) {
  DataConfig d;
  d.dir = n.get<std::string>("dir", d.dir);
  d.shuffle = n.get<bool>("shuffle", d.shuffle);
  d.vocab = n.get<std::string>("vocab", d.vocab);
  n.finish();
  return d;
}

}  // namespace prism
