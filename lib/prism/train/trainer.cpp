#include "prism/train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "prism/data/loader.h"
#include "prism/error.h"
#include "prism/model/cost.h"
#include "prism/model/gpt.h"
#include "prism/store/run_store.h"
#include "prism/store/safetensors.h"
#include "prism/train/checkpoint.h"
#include "prism/train/execution.h"
#include "prism/train/lr_schedule.h"
#include "prism/train/optimizer.h"
#include "prism/train/step.h"
#include "prism/train/stop_signal.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto total = static_cast<int64_t>(s + 0.5);
  if (total >= 3600) return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

std::string format_count(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// Data for one run: the training stream, the fixed validation set and the
// fixed batch on which attention distance is measured.
struct RunData {
  std::unique_ptr<TokenLoader> train;
  std::unique_ptr<TokenLoader> val;
  int64_t val_batches = 0;
  torch::Tensor distance_x;
};

RunData open_data(const Config& c) {
  if (c.data.dir.empty())
    throw Error("no training data given", "data.dir",
                "set data.dir to a prepared corpus (prism data prepare), e.g. data.dir=data/cache/<corpus>");
  auto train_shards = find_shards(c.data.dir, "train");
  auto val_shards = find_shards(c.data.dir, "val");
  if (train_shards.empty() || val_shards.empty())
    throw Error(fmt::format("found {} training and {} validation shards", train_shards.size(), val_shards.size()),
                c.data.dir, "prepare the corpus with `prism data prepare` (it writes *_val_*.bin and *_train_*.bin)");
  RunData d;
  LoaderOptions lo;
  lo.shards = train_shards;
  lo.batch = c.train.batch_size;
  lo.seq_len = c.train.seq_len;
  lo.shuffle = c.data.shuffle;
  lo.seed = c.train.seed;
  d.train = std::make_unique<TokenLoader>(lo);
  LoaderOptions vo = lo;
  vo.shards = val_shards;
  vo.shuffle = false;
  d.val = std::make_unique<TokenLoader>(vo);
  const int64_t per_batch = c.train.batch_size * c.train.seq_len;
  d.val_batches = std::max<int64_t>(1, std::min(d.val->batches_per_epoch(), (c.train.eval_tokens + per_batch - 1) / per_batch));
  LoaderOptions dq = vo;
  dq.batch = c.train.distance_batch;
  TokenLoader dist(dq);
  d.distance_x = dist.next().first;
  return d;
}

class Loop {
 public:
  Loop(const Config& c, const TrainOptions& o) : c_(c), o_(o) {}

  TrainSummary run();

 private:
  void log(const std::string& s) const {
    if (o_.log) o_.log(s);
    else std::cout << s << std::endl;
  }
  void prepare_run_dir();
  double validate();
  std::vector<std::vector<double>> measure_distance();
  void checkpoint();

  const Config& c_;
  const TrainOptions& o_;
  Execution exec_;
  GPT model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt_;
  RunData data_;
  std::optional<RunStore> store_;
  TrainerState st_;
  std::string config_yaml_;
  int64_t accum_ = 1;
  std::string last_checkpoint_;
};

void Loop::prepare_run_dir() {
  const fs::path dir(o_.run_dir);
  const fs::path h5 = dir / "run.h5";
  if (o_.resume) return;
  if (fs::exists(h5) || fs::exists(dir / "checkpoints")) {
    if (!o_.force)
      throw Error("a run already exists here", o_.run_dir,
                  "continue it with --resume, choose another --out directory, or replace it with --force");
    log(fmt::format("--force: replacing the run in {}", o_.run_dir));
    fs::remove(h5);
    fs::remove_all(dir / "checkpoints");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create the run directory: {}", ec.message()), o_.run_dir, "check the path and permissions");
}

double Loop::validate() {
  torch::NoGradGuard ng;
  model_->eval();
  data_.val->reset();
  double total = 0;
  for (int64_t b = 0; b < data_.val_batches; ++b) {
    auto [x, y] = data_.val->next();
    AutocastScope autocast(exec_);
    total += model_->forward(x.to(exec_.device), y.to(exec_.device)).loss.item<double>();
  }
  return total / static_cast<double>(data_.val_batches);
}

std::vector<std::vector<double>> Loop::measure_distance() {
  torch::NoGradGuard ng;
  model_->eval();
  // A back end without distance output (sdpa) hands this measurement to auto (fused or reference).
  const auto configured = model_->attention_options().backend;
  if (!attention::supports_distance(configured)) model_->attention_options().backend = attention::Backend::Auto;
  auto out = model_->forward(data_.distance_x.to(exec_.device), {}, /*want_distance=*/true);
  model_->attention_options().backend = configured;
  std::vector<std::vector<double>> per_head;
  for (const auto& d : out.distance) {  // (B, h, T) -> mean over batch and queries
    auto m = d.to(torch::kDouble).mean({0, 2}).to(torch::kCPU).contiguous();
    per_head.emplace_back(m.data_ptr<double>(), m.data_ptr<double>() + m.numel());
  }
  return per_head;
}

void Loop::checkpoint() {
  st_.loader = data_.train->state();
  last_checkpoint_ = save_checkpoint(o_.run_dir, model_, *opt_, st_, config_yaml_);
}

TrainSummary Loop::run() {
  prepare_run_dir();
  exec_ = resolve_execution(c_.train);
  torch::manual_seed(c_.train.seed);
  config_yaml_ = to_yaml(c_);
  model_ = GPT(c_.model, c_.schedule);
  model_->attention_options().backend = attention::parse_backend(c_.attention.backend);
  model_->to(exec_.device);
  opt_ = make_adamw(*model_, c_.train);
  data_ = open_data(c_);
  const int64_t micro_tokens = c_.train.batch_size * c_.train.seq_len;
  accum_ = c_.train.tokens_per_step > 0 ? c_.train.tokens_per_step / micro_tokens : 1;
  const int64_t step_tokens = accum_ * micro_tokens;

  if (o_.resume) {
    auto ckpt = latest_checkpoint(o_.run_dir);
    if (!ckpt) throw Error("no checkpoint to resume from", o_.run_dir, "start the run without --resume");
    load_checkpoint(*ckpt, model_, *opt_, st_);
    data_.train->restore(st_.loader);
    store_.emplace(RunStore::resume((fs::path(o_.run_dir) / "run.h5").string(), st_.step));
    last_checkpoint_ = *ckpt;
    log(fmt::format("resumed {} at step {} ({} tokens)", *ckpt, st_.step, format_count(static_cast<double>(st_.tokens))));
  } else {
    write_file_atomic((fs::path(o_.run_dir) / "config.yaml").string(), config_yaml_);
    store_.emplace(RunStore::create((fs::path(o_.run_dir) / "run.h5").string(),
                                    RunAttributes{config_yaml_, c_.schedule.heads(), c_.train.seed, PRISM_VERSION}));
  }

  auto cost = model_cost(c_.model, c_.schedule, static_cast<int>(c_.train.seq_len));
  log(fmt::format("model: {} layers x {}, heads {}, {} parameters ({} without positions)", c_.model.n_layer,
                  c_.model.d_model, c_.schedule.compact(), format_count(static_cast<double>(cost.params)),
                  format_count(static_cast<double>(cost.params_without_positions))));
  log(fmt::format("run: {} | {} | attention {} | {} steps x {} tokens ({} micro-batch{} of {}x{})", o_.run_dir,
                  exec_.describe(), c_.attention.backend, c_.train.max_steps, step_tokens, accum_,
                  accum_ == 1 ? "" : "es", c_.train.batch_size, c_.train.seq_len));
  log(fmt::format("data: {} train tokens, {} validation batches", format_count(static_cast<double>(data_.train->tokens())),
                  data_.val_batches));

  install_stop_handlers();
  TrainSummary sum;
  sum.run_dir = o_.run_dir;
  sum.status = "completed";
  const auto t0 = Clock::now();
  double window_t = 0;
  int64_t window_tokens = 0;
  double last_loss = std::nan("");

  auto measure = [&](int64_t step, bool force) {
    const bool last = step == c_.train.max_steps;
    if ((c_.train.eval_every > 0 && step % c_.train.eval_every == 0) || last || force) {
      double v = validate();
      store_->append_val({step, st_.tokens, v});
      if (v < st_.best_val_loss) {
        st_.best_val_loss = v;
        st_.best_val_step = step;
      }
      sum.val_loss = v;
      log(fmt::format("step {:>6} | val loss {:.4f}{}", step, v, st_.best_val_step == step ? " (best)" : ""));
    }
    if ((c_.train.distance_every > 0 && step % c_.train.distance_every == 0) || last || force) {
      store_->append_attention(step, measure_distance());
    }
  };

  try {
    if (st_.step == 0) measure(0, true);
    while (st_.step < c_.train.max_steps) {
      const auto ts = Clock::now();
      const double lr = learning_rate(c_.train, st_.step);
      set_learning_rate(*opt_, lr);
      auto r = optimizer_step(model_, *opt_, exec_, [&] { return data_.train->next(); }, accum_, c_.train.grad_clip);
      const double loss = r.loss, norm = r.grad_norm;
      if (r.diverged()) {
        sum.status = "failed";
        sum.message = fmt::format(
            "training diverged at step {} (loss {}, gradient norm {}); stopped without applying or saving that step. "
            "The last good checkpoint is {}. Fix: lower train.lr, raise train.warmup_steps or use train.grad_clip",
            st_.step + 1, loss, norm, last_checkpoint_.empty() ? "none" : last_checkpoint_);
        break;
      }
      st_.step += 1;
      st_.tokens += step_tokens;
      const double dt = seconds_since(ts);
      st_.elapsed_s += dt;
      last_loss = loss;
      store_->append_train({st_.step, st_.tokens, loss, lr, norm, st_.elapsed_s});
      window_t += dt;
      window_tokens += step_tokens;
      if (st_.step % c_.train.log_every == 0 || st_.step == c_.train.max_steps) {
        const double tps = window_tokens / std::max(window_t, 1e-9);
        const double eta = (c_.train.max_steps - st_.step) * step_tokens / std::max(tps, 1e-9);
        log(fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {} tok/s | elapsed {} | ETA {}", st_.step,
                        c_.train.max_steps, loss, lr, norm, format_count(tps), format_duration(st_.elapsed_s),
                        format_duration(eta)));
        window_t = 0;
        window_tokens = 0;
      }
      const bool stop = stop_requested();
      measure(st_.step, false);
      if ((c_.train.checkpoint_every > 0 && st_.step % c_.train.checkpoint_every == 0) ||
          st_.step == c_.train.max_steps || stop) {
        checkpoint();
      }
      if (stop) {
        sum.status = "interrupted";
        sum.message = fmt::format("stopped by signal {} after step {}; continue with --resume", stop_signal(), st_.step);
        break;
      }
    }
  } catch (const Error& e) {
    sum.status = "failed";
    sum.message = e.what();
  }
  store_->set_status(sum.status);
  store_->close();

  sum.steps = st_.step;
  sum.tokens = st_.tokens;
  sum.train_loss = last_loss;
  sum.best_val_loss = st_.best_val_loss;
  sum.best_val_step = st_.best_val_step;
  sum.wall_s = seconds_since(t0);
  sum.tokens_per_s = st_.elapsed_s > 0 ? static_cast<double>(st_.tokens) / st_.elapsed_s : 0;
  sum.checkpoint = last_checkpoint_;
  log(fmt::format("{}: {} steps, {} tokens in {} ({} tok/s) | train loss {:.4f} | val loss {:.4f} (best {:.4f} at step {}) | "
                  "run {} | checkpoint {}",
                  sum.status, sum.steps, format_count(static_cast<double>(sum.tokens)), format_duration(st_.elapsed_s),
                  format_count(sum.tokens_per_s), sum.train_loss, sum.val_loss, sum.best_val_loss, sum.best_val_step,
                  o_.run_dir, last_checkpoint_.empty() ? "none" : last_checkpoint_));
  if (!sum.message.empty()) log(sum.message);
  return sum;
}

}  // namespace

TrainSummary train(const Config& config, const TrainOptions& options) {
  Loop loop(config, options);
  return loop.run();
}

Config load_run_config(const std::string& run_dir, const std::vector<std::string>& overrides) {
  const std::string path = (fs::path(run_dir) / "config.yaml").string();
  if (!fs::exists(path))
    throw Error("no config.yaml in the run directory", run_dir, "pass the run directory that prism train created (--out)");
  return load_config(path, overrides);
}

}  // namespace prism
