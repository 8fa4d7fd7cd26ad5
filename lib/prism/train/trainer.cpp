#include "prism/train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "prism/atomic_file.h"
#include "prism/config/cost.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/format.h"
#include "prism/model/gpt.h"
#include "prism/ops/adamw.h"
#include "prism/store/run_store.h"
#include "prism/train/checkpoint.h"
#include "prism/train/cpu_dtype_probe.h"
#include "prism/train/distributed.h"
#include "prism/train/execution.h"
#include "prism/train/loader.h"
#include "prism/train/lr_schedule.h"
#include "prism/train/optimizer.h"
#include "prism/train/position_loss.h"
#include "prism/train/step.h"
#include "prism/launch/signals.h"
#include "prism/train/training_extension.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Data for one run: the training stream, the fixed validation set and the
// fixed batch on which attention distance is measured.
struct RunData {
  std::unique_ptr<TokenLoader> train;
  std::unique_ptr<TokenLoader> val;
  int64_t val_batches = 0;
  torch::Tensor distance_x;
};

// Training windows are disjoint across ranks (each reads B of the step's
// B x world_size x accum); validation and distance sets are the same for all.
RunData open_data(const Config& c, const ProcessGroup& group, int64_t accum) {
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
  lo.rank = group.rank();
  lo.world_size = group.world_size();
  lo.accum = accum;
  lo.vocab_size = c.model.vocab_size;
  d.train = std::make_unique<TokenLoader>(lo);
  LoaderOptions vo = lo;
  vo.rank = 0;
  vo.world_size = 1;
  vo.accum = 1;
  vo.shards = val_shards;
  vo.shuffle = false;
  d.val = std::make_unique<TokenLoader>(vo);
  const int64_t per_batch = c.train.batch_size * c.train.seq_len;
  d.val_batches = std::max<int64_t>(1, std::min(d.val->batches_per_epoch(), (c.train.eval_tokens + per_batch - 1) / per_batch));
  LoaderOptions dist = vo;
  dist.batch = c.train.distance_batch;
  d.distance_x = TokenLoader(dist).next().first;
  return d;
}

// How one optimizer step's tokens divide among processes and micro-batches. The
// global batch (train.tokens_per_step) is the same whatever the world size; each
// rank accumulates its share.
struct StepShape {
  int64_t micro_tokens = 0;  // batch_size x seq_len: one forward and backward
  int64_t accum = 1;         // micro-batches per rank and step
  int64_t step_tokens = 0;   // tokens of one optimizer step over all ranks
};

StepShape step_shape(const TrainConfig& t, int world) {
  StepShape s;
  s.micro_tokens = t.batch_size * t.seq_len;
  if (t.tokens_per_step > 0 && t.tokens_per_step % (s.micro_tokens * world) != 0)
    throw Error(fmt::format("train.tokens_per_step = {} is not a multiple of batch_size x seq_len x processes = {} x {} x {}",
                            t.tokens_per_step, t.batch_size, t.seq_len, world),
                "train.tokens_per_step",
                fmt::format("use a multiple of {}, or a train.batch_size that divides the step among {} processes",
                            s.micro_tokens * world, world));
  s.accum = t.tokens_per_step > 0 ? t.tokens_per_step / (s.micro_tokens * world) : 1;
  s.step_tokens = s.accum * s.micro_tokens * world;
  return s;
}

// Runs `setup` on every rank of `group`. A failure on any rank stops all of them
// here, before a collective could hang on it: the failing rank rethrows its own
// error, the others say that another rank failed.
void on_every_rank(ProcessGroup& group, const std::function<void()>& setup) {
  std::exception_ptr error;
  try {
    setup();
  } catch (...) {
    error = std::current_exception();
  }
  if (!group.any(error != nullptr)) return;
  if (error) std::rethrow_exception(error);
  throw Error("another rank failed to start the run", fmt::format("rank {} of {}", group.rank(), group.world_size()),
              "see rank 0's error (or that of the rank that failed) and fix it");
}

// The rank's GPU made current before any process group exists (bind_rank_device),
// and with several processes an even share of this host's cores when
// train.threads is 0 ("all cores").
void place_rank(Execution& exec, const TrainConfig& t) {
  const DistributedEnv e = read_distributed_env();
  exec.device = bind_rank_device(e, exec.device);
  if (e.world_size == 1) return;
  if (t.threads == 0) {
    torch::set_num_threads(std::max(1, exec.threads / std::max(1, e.local_world_size)));
    exec.threads = torch::get_num_threads();
  }
}

// Tokens and seconds since the last progress line, for its tokens/s.
struct ThroughputWindow {
  double seconds = 0;
  int64_t tokens = 0;
};

class Loop {
 public:
  Loop(const Config& c, const TrainOptions& o) : c_(c), o_(o), ext_(o.extension) {
    sum_.run_dir = o.run_dir;
    sum_.status = "completed";
    sum_.train_loss = std::nan("");
    sum_.val_loss = std::nan("");
  }

  TrainSummary run();

 private:
  // Progress is rank 0's; the other ranks report only failures (in the summary).
  void log(const std::string& s) const {
    if (!group_->is_root()) return;
    if (o_.log) o_.log(s);
    else std::cout << s << std::endl;
  }
  void setup();
  void take_root_dtype();
  void build();
  void prepare_run_dir();
  void resume();
  void create_store();
  void start_data_parallel();
  void log_start() const;
  void warn_slow_bf16() const;
  void train();
  void log_progress(const StepResult& r, double lr, double dt);
  void measure(int64_t step, bool force);
  ValRow validate(const ForwardOptions& options, int64_t batches);
  HeldOutLoss held_out_loss();
  void finish_extension();
  void record_position_loss();
  std::vector<std::vector<double>> measure_distance();
  bool checkpoint_due(bool stop) const;
  bool checkpoint_time_due() const;
  void checkpoint();
  void verify_replicas();
  void end_run(const std::string& status, const std::string& message);
  void close_store();
  TrainSummary summarize(double wall_s);

  const Config& c_;
  const TrainOptions& o_;
  TrainingExtension* ext_ = nullptr;
  std::shared_ptr<ProcessGroup> group_ = ProcessGroup::single();
  std::unique_ptr<GradientSync> sync_;  // world size > 1 only
  Execution exec_;
  StepShape shape_;
  GPT model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt_;
  RunData data_;
  std::optional<RunStore> store_;
  TrainerState st_;
  std::string config_yaml_;
  std::string last_checkpoint_;
  Clock::time_point last_checkpoint_time_ = Clock::now();
  std::string init_file_;  // the model.safetensors train.init_from named (a fresh run)
  ThroughputWindow window_;
  TrainSummary sum_;
  double unigram_ = std::nan("");  // the data's unigram baseline (prepare.json), printed beside every val loss
};

TrainSummary Loop::run() {
  setup();
  log_start();
  warn_slow_bf16();
  install_stop_handlers();
  const auto t0 = Clock::now();
  try {
    train();
    if (sum_.status == "completed") {
      record_position_loss();
      finish_extension();
    }
  } catch (const Error& e) {
    end_run("failed", e.what());
    group_->report_failure(e);  // the other ranks say why they stop (e.g. rank 0 could not save)
  }
  close_store();
  return summarize(seconds_since(t0));
}

// The training loop: one optimizer step per iteration, then the measurements and
// the checkpoint that are due.
void Loop::train() {
  last_checkpoint_time_ = Clock::now();
  if (st_.step == 0) measure(0, /*force=*/true);
  while (st_.step < c_.train.max_steps) {
    const auto t0 = Clock::now();
    const double lr = learning_rate(c_.train, st_.step);
    set_learning_rate(*opt_, lr);
    MicroBatchOptions micro;
    if (ext_) {
      // Micro-batch m of rank r is slot m * world + r: the windows a single process reads as its micro-batch of that number.
      const int64_t world = group_->world_size(), rank = group_->rank(), slots = shape_.accum * world;
      micro = [&, world, rank, slots](int64_t m) { return ext_->micro_batch(st_.step, m * world + rank, slots); };
    }
    const StepResult r = optimizer_step(model_, *opt_, exec_, [&] { return data_.train->next(); }, shape_.accum,
                                        c_.train.grad_clip, sync_.get(), micro);
    if (r.diverged())
      return end_run("failed", fmt::format("training diverged at step {} (loss {}, gradient norm {}); stopped without "
                                           "applying or saving that step. The last good checkpoint is {}. Fix: lower "
                                           "train.lr, raise train.warmup_steps or use train.grad_clip",
                                           st_.step + 1, r.loss, r.grad_norm,
                                           last_checkpoint_.empty() ? "none" : last_checkpoint_));
    st_.step += 1;
    st_.tokens += shape_.step_tokens;
    if (ext_) ext_->after_step(st_.step, store_ ? &*store_ : nullptr);
    const double dt = seconds_since(t0);
    st_.elapsed_s += dt;
    sum_.train_loss = r.loss;
    if (store_) store_->append_train({st_.step, st_.tokens, r.loss, lr, r.grad_norm, st_.elapsed_s});
    log_progress(r, lr, dt);
    const bool stop = group_->any(stop_requested());  // a signal to any rank stops them all after this step
    measure(st_.step, /*force=*/false);
    if (checkpoint_due(stop) || checkpoint_time_due()) {
      verify_replicas();
      checkpoint();
    }
    if (stop)
      return end_run("interrupted",
                     fmt::format("stopped by {} after step {}; continue with --resume", signal_name(stop_signal()), st_.step));
  }
}

// Device, processes and step shape, then the run's objects on every rank (or one
// error for all of them), then identical replicas when data-parallel.
void Loop::setup() {
  exec_ = resolve_execution(c_.train);
  place_rank(exec_, c_.train);
  group_ = ProcessGroup::from_environment(exec_.device);
  if (group_->distributed() && c_.train.dtype == "auto") take_root_dtype();
  shape_ = step_shape(c_.train, group_->world_size());
  on_every_rank(*group_, [&] { build(); });
  st_.world_size = group_->world_size();
  if (group_->distributed()) start_data_parallel();
}

// dtype auto measured on each rank may differ between ranks (one measured under load):
// every rank trains in rank 0's choice.
void Loop::take_root_dtype() {
  auto flag = torch::tensor({exec_.bf16 ? 1 : 0}, torch::TensorOptions().dtype(torch::kInt).device(exec_.device));
  group_->broadcast({flag});
  const bool root_bf16 = flag.item<int>() != 0;
  if (root_bf16 == exec_.bf16) return;
  exec_.bf16 = root_bf16;
  exec_.dtype_reason = fmt::format("auto -> {}, rank 0's choice (this rank measured: {})", root_bf16 ? "bf16" : "fp32",
                                   exec_.dtype_reason);
}

// The run directory, model, optimizer, data and run store: fresh, or resumed from
// the newest checkpoint. The seed is set first, so a run's weights depend on it alone.
void Loop::build() {
  if (group_->is_root()) prepare_run_dir();
  torch::manual_seed(c_.train.seed);
  // config.yaml records what ran: train.dtype as resolved (auto -> fp32 or bf16), as it records
  // the data's vocabulary; a resumed run continues in it, and `prism report` keys runs on it.
  Config recorded = c_;
  recorded.train.dtype = exec_.bf16 ? "bf16" : "fp32";
  config_yaml_ = to_yaml(recorded);
  model_ = GPT(c_.model, c_.schedule, attention::parse_backend(c_.attention.backend));
  model_->to(exec_.device);
  if (!o_.resume && !c_.train.init_from.empty()) {
    // Every rank reads the same file: the replicas start identical as seeded ones do.
    init_file_ = checkpoint_model_file(c_.train.init_from);
    load_weights(model_, init_file_);
  }
  opt_ = make_adamw(*model_, c_.train);
  if (ext_) ext_->attach(model_, exec_);
  data_ = open_data(c_, *group_, shape_.accum);
  unigram_ = describe_data(c_.data.dir).unigram_val_loss;
  if (o_.resume) resume();
  else if (group_->is_root()) create_store();
}

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

void Loop::resume() {
  auto ckpt = latest_checkpoint(o_.run_dir);
  if (!ckpt) throw Error("no checkpoint to resume from", o_.run_dir, "start the run without --resume");
  CheckpointExtra extra;
  load_checkpoint(*ckpt, model_, *opt_, st_, ext_ ? &extra : nullptr);
  if (ext_) ext_->restore(extra);
  data_.train->restore(st_.loader);
  const int world = group_->world_size();
  if (group_->is_root()) store_.emplace(RunStore::resume((fs::path(o_.run_dir) / "run.h5").string(), st_.step));
  if (store_) store_->set_world_size(world);
  last_checkpoint_ = *ckpt;
  log(fmt::format("resumed {} at step {} ({} tokens){}", *ckpt, st_.step, format_count(static_cast<double>(st_.tokens)),
                  st_.world_size == world ? "" : fmt::format(", trained so far by {} processes, now {}", st_.world_size, world)));
}

void Loop::create_store() {
  write_file_atomic((fs::path(o_.run_dir) / "config.yaml").string(), config_yaml_);
  RunAttributes attrs{config_yaml_, c_.schedule.heads(), c_.train.seed, PRISM_VERSION};
  attrs.world_size = group_->world_size();
  attrs.unigram_val_loss = unigram_;
  attrs.dtype = exec_.bf16 ? "bf16" : "fp32";
  attrs.dtype_reason = exec_.dtype_reason;
  if (ext_) attrs.search = ext_->store_layout(shape_.accum * group_->world_size());
  store_.emplace(RunStore::create((fs::path(o_.run_dir) / "run.h5").string(), attrs));
}

void Loop::start_data_parallel() {
  // Identical starting weights everywhere (they already are when seeded alike; this makes it a fact).
  std::vector<torch::Tensor> params;
  for (auto& p : model_->parameters()) params.push_back(p);
  if (ext_)
    for (auto& p : ext_->parameters()) params.push_back(p);
  group_->broadcast(params);
  sync_ = std::make_unique<GradientSync>(group_, params);
}

void Loop::log_start() const {
  auto cost = model_cost(c_.model, c_.schedule, static_cast<int>(c_.train.seq_len));
  log(fmt::format("model: {} layers x {}, heads {}, {} parameters ({} without positions)", c_.model.n_layer,
                  c_.model.d_model, c_.schedule.compact(), format_count(static_cast<double>(cost.params)),
                  format_count(static_cast<double>(cost.params_without_positions))));
  log(fmt::format("run: {} | {} | attention {} | {} steps x {} tokens ({} micro-batch{} of {}x{})", o_.run_dir,
                  exec_.describe(), c_.attention.backend, c_.train.max_steps, shape_.step_tokens, shape_.accum,
                  shape_.accum == 1 ? "" : "es", c_.train.batch_size, c_.train.seq_len));
  log("dtype: " + exec_.dtype_reason);
  if (!init_file_.empty()) log("weights: from " + init_file_ + " (train.init_from; optimizer and data start fresh)");
  log(fmt::format("data: {} train tokens, {} validation batches, vocabulary {} ids ({}){}",
                  format_count(static_cast<double>(data_.train->tokens())), data_.val_batches, c_.model.vocab_size,
                  vocab_path_for(c_),
                  std::isnan(unigram_) ? "" : fmt::format(", unigram baseline {:.4f} nats", unigram_)));
  if (group_->distributed())
    log(fmt::format("data parallel: {}; {} gradient bucket{} all-reduced during the backward", group_->describe(),
                    sync_->bucket_count(), sync_->bucket_count() == 1 ? "" : "s"));
  if (ext_) log(ext_->describe());
  if (trains_on_working_copies(*opt_, exec_))
    log(fmt::format("weights: bf16 working copies of the matmul weights, written by the AdamW kernel (Highway {}){}",
                    adamw_cpu_target(), group_->distributed() ? "; their gradients averaged in fp32" : ""));
}

// Before the first step: bf16 on a CPU where it multiplies slower than fp32 says so, with the
// measured ratio, the ETA in both dtypes and the override that fixes it.
void Loop::warn_slow_bf16() const {
  if (!exec_.bf16 || !exec_.device.is_cpu() || !group_->is_root() || st_.step >= c_.train.max_steps) return;
  StepWork w;
  w.d_model = c_.model.d_model;
  w.rows = c_.train.batch_size * c_.train.seq_len;
  w.flops = model_cost(c_.model, c_.schedule, static_cast<int>(c_.train.seq_len)).train_flops_per_token *
            static_cast<double>(shape_.step_tokens);
  w.steps = c_.train.max_steps - st_.step;
  // Validations: at step 0 (a fresh run), every eval_every steps, and at the last step.
  const int64_t every = c_.train.eval_every;
  w.evals = (st_.step == 0 ? 1 : 0) + (every > 0 ? c_.train.max_steps / every - st_.step / every : 0) +
            (every > 0 && c_.train.max_steps % every == 0 ? 0 : 1);
  w.eval_flops = static_cast<double>(w.evals) * static_cast<double>(data_.val_batches) *
                 static_cast<double>(c_.train.batch_size * c_.train.seq_len) *
                 model_cost(c_.model, c_.schedule, static_cast<int>(c_.train.seq_len)).train_flops_per_token / 3.0;
  if (const std::string warning = slow_bf16_warning(w); !warning.empty()) log(warning);
}

void Loop::log_progress(const StepResult& r, double lr, double dt) {
  window_.seconds += dt;
  window_.tokens += shape_.step_tokens;
  if (st_.step % c_.train.log_every != 0 && st_.step != c_.train.max_steps) return;
  const double tps = window_.tokens / std::max(window_.seconds, 1e-9);
  const double eta = (c_.train.max_steps - st_.step) * shape_.step_tokens / std::max(tps, 1e-9);
  log(fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {} tok/s | elapsed {} | ETA {}", st_.step,
                  c_.train.max_steps, r.loss, lr, r.grad_norm, format_count(tps), format_duration(st_.elapsed_s),
                  format_duration(eta)));
  window_ = {};
}

// Validation loss and attention distance, each when its cadence says, at the last step, or when forced.
void Loop::measure(int64_t step, bool force) {
  const bool last = step == c_.train.max_steps;
  if ((c_.train.eval_every > 0 && step % c_.train.eval_every == 0) || last || force) {
    ValRow row = validate(ext_ ? ext_->validation() : ForwardOptions{}, data_.val_batches);
    row.step = step;
    const double v = row.loss;
    if (store_) store_->append_val(row);
    if (v < st_.best_val_loss) {
      st_.best_val_loss = v;
      st_.best_val_step = step;
    }
    sum_.val_loss = v;
    log(fmt::format("step {:>6} | val loss {:.4f}{}{}{}", step, v,
                    std::isnan(row.loss_se) ? "" : fmt::format(" ± {:.4f}", row.loss_se),
                    st_.best_val_step == step ? " (best)" : "",
                    std::isnan(unigram_) ? "" : fmt::format(" | unigram {:.4f}", unigram_)));
    if (ext_) ext_->measure(step, held_out_loss(), store_ ? &*store_ : nullptr);
  }
  if ((c_.train.distance_every > 0 && step % c_.train.distance_every == 0) || last || force) {
    auto d = measure_distance();
    if (store_) store_->append_attention(step, d);
  }
}

// The loss and its standard error over batches (ValRow::loss_se) on the first
// `batches` validation batches under `options`, at this step.
ValRow Loop::validate(const ForwardOptions& options, int64_t batches) {
  torch::NoGradGuard ng;
  model_->eval();
  data_.val->reset();
  double sum = 0, sum_sq = 0;  // of the per-batch mean losses
  auto add = [&](torch::Tensor x, torch::Tensor y) {
    AutocastScope autocast(exec_);
    const double l = model_->forward(x.to(exec_.device), y.to(exec_.device), options).loss.item<double>();
    sum += l;
    sum_sq += l * l;
  };
  if (!group_->distributed()) {
    for (int64_t b = 0; b < batches; ++b) {
      auto [x, y] = data_.val->next();
      add(x, y);
    }
  } else {
    // Rank r takes batches r, r + world, ...; the sums over ranks are the 1-process sums.
    for (int64_t b = group_->rank(); b < batches; b += group_->world_size()) {
      LoaderState at = data_.val->state();
      at.epoch = 0;
      at.position = static_cast<uint64_t>(b);
      data_.val->restore(at);
      auto [x, y] = data_.val->next();
      add(x, y);
    }
    auto sums = torch::tensor({sum, sum_sq}, torch::dtype(torch::kDouble)).to(exec_.device);
    group_->all_reduce_sum(sums);
    sums = sums.cpu();
    sum = sums[0].item<double>();
    sum_sq = sums[1].item<double>();
  }
  const auto n = static_cast<double>(batches);
  ValRow row{st_.step, st_.tokens, sum / n};
  if (n > 1) row.loss_se = std::sqrt(std::max(0.0, (sum_sq - sum * sum / n) / (n - 1)) / n);
  return row;
}

// validate() for the extension: at most the validation set's batches.
HeldOutLoss Loop::held_out_loss() {
  return [this](const ForwardOptions& options, int64_t batches) {
    return validate(options, batches > 0 ? std::min(batches, data_.val_batches) : data_.val_batches);
  };
}

// At the end of training, the validation loss by query position on the validation
// windows (position_loss.h), in run.h5 under /val/by_position/T<seq_len>; rank 0
// alone, not for a search (its model has no one schedule), nor for a finished run
// resumed (no validation ran in this process).
void Loop::record_position_loss() {
  if (!group_->is_root() || !store_ || ext_ || std::isnan(sum_.val_loss)) return;
  data_.val->reset();
  PositionLossOptions po;
  po.batches = data_.val_batches;
  po.execution = &exec_;
  PositionLoss p = measure_position_loss(model_, *data_.val, po);
  p.step = st_.step;
  p.trained_context = c_.train.seq_len;
  p.checkpoint = last_checkpoint_;
  p.data = c_.data.dir;
  p.source = fs::path(o_.run_dir).filename().string();
  const std::string group = position_loss_group(p.context);
  store_->write_group(group, to_result_group(p));
  const auto loss = p.loss();
  std::string line;
  for (int64_t b = 0; b < p.buckets(); ++b) {
    const int64_t lo = p.bucket_edges[b], hi = p.bucket_edges[b + 1];
    line += fmt::format("{}{} {:.3f}", b ? " | " : "", position_bucket_label(lo, hi), loss[static_cast<size_t>(b)]);
  }
  log(fmt::format("val loss by position: {} -> run.h5:/{}", line, group));
}

// The extension's results once training is complete; a failure fails the run.
void Loop::finish_extension() {
  if (!ext_ || st_.step < c_.train.max_steps) return;
  ext_->finish(held_out_loss(), store_ ? &*store_ : nullptr, o_.run_dir, group_->is_root());
}

// Per layer, the per-head mean of the distance over the fixed batch, from a
// forward pass that stops before the LM head.
std::vector<std::vector<double>> Loop::measure_distance() {
  torch::NoGradGuard ng;
  model_->eval();
  const auto pass = ForwardOptions::distance_only();
  std::vector<std::vector<double>> per_head;
  if (!group_->distributed()) {
    auto out = model_->forward(data_.distance_x.to(exec_.device), {}, pass);
    for (const auto& d : out.distance) {  // (B, h, T) -> mean over batch and queries
      auto m = d.to(torch::kDouble).mean({0, 2}).to(torch::kCPU).contiguous();
      per_head.emplace_back(m.data_ptr<double>(), m.data_ptr<double>() + m.numel());
    }
    return per_head;
  }
  // Each rank measures a slice of the batch's rows; per-head sums are added over ranks.
  const auto& heads = c_.schedule.heads();
  const int64_t n = data_.distance_x.size(0), T = data_.distance_x.size(1);
  const int64_t lo = n * group_->rank() / group_->world_size(), hi = n * (group_->rank() + 1) / group_->world_size();
  std::vector<torch::Tensor> sums;
  if (hi > lo) {
    auto out = model_->forward(data_.distance_x.slice(0, lo, hi).to(exec_.device), {}, pass);
    for (const auto& d : out.distance) sums.push_back(d.to(torch::kDouble).sum({0, 2}));
  } else {
    for (int h : heads) sums.push_back(torch::zeros({h}, torch::dtype(torch::kDouble).device(exec_.device)));
  }
  auto flat = torch::cat(sums);
  group_->all_reduce_sum(flat);
  flat = (flat / static_cast<double>(n * T)).to(torch::kCPU).contiguous();
  int64_t off = 0;
  for (int h : heads) {
    per_head.emplace_back(flat.data_ptr<double>() + off, flat.data_ptr<double>() + off + h);
    off += h;
  }
  return per_head;
}

bool Loop::checkpoint_due(bool stop) const {
  return (c_.train.checkpoint_every > 0 && st_.step % c_.train.checkpoint_every == 0) ||
         st_.step == c_.train.max_steps || stop;
}

// train.checkpoint_minutes of wall clock since the last checkpoint (or this process's start of
// training): every rank's clock is asked, so the ranks checkpoint at the same step.
bool Loop::checkpoint_time_due() const {
  if (c_.train.checkpoint_minutes <= 0) return false;
  const double minutes = std::chrono::duration<double>(Clock::now() - last_checkpoint_time_).count() / 60.0;
  return group_->any(minutes >= c_.train.checkpoint_minutes);
}

void Loop::checkpoint() {
  last_checkpoint_time_ = Clock::now();
  st_.loader = data_.train->state();
  CheckpointExtra extra;
  if (ext_) extra = ext_->state();
  if (group_->is_root())
    last_checkpoint_ = save_checkpoint(o_.run_dir, model_, *opt_, st_, config_yaml_, 2, ext_ ? &extra : nullptr);
  else last_checkpoint_ = (fs::path(o_.run_dir) / "checkpoints" / fmt::format("step_{:06d}", st_.step)).string();
}

// Data parallelism keeps one model in N copies; this proves it (bit for bit) at
// checkpoints and at the end, against rank 0's digest of every parameter.
void Loop::verify_replicas() {
  if (!group_->distributed()) return;
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (const auto& p : model_->parameters()) {
    auto c = p.detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    const size_t n = static_cast<size_t>(c.numel()) * c.element_size();
    for (size_t i = 0; i < n; i += 8) {
      uint64_t w = 0;
      std::memcpy(&w, bytes + i, std::min<size_t>(8, n - i));
      h = (h ^ w) * 0x100000001B3ULL;
      h ^= h >> 29;
    }
  }
  int64_t mine = 0;
  std::memcpy(&mine, &h, sizeof h);
  auto root = torch::full({1}, mine, torch::dtype(torch::kLong).device(exec_.device));
  group_->broadcast({root});
  const bool differ = group_->any(root.item<int64_t>() != mine);
  if (differ)
    throw Error(fmt::format("the model replicas differ across the {} ranks at step {}", group_->world_size(), st_.step),
                fmt::format("rank {}", group_->rank()),
                "this is a bug in data-parallel training (or non-deterministic kernels); report it with the config");
  log(fmt::format("step {:>6} | weights identical on {} ranks (digest {:016x})", st_.step, group_->world_size(), h));
}

void Loop::end_run(const std::string& status, const std::string& message) {
  sum_.status = status;
  sum_.message = message;
}

void Loop::close_store() {
  if (!store_) return;
  // run.h5 knows running | completed | failed; an interrupted run stays "running" until resumed.
  try {
    if (sum_.status != "interrupted") store_->set_status(sum_.status);
    store_->close();
  } catch (const Error& e) {
    // A store stopped by a failed write (a full disk) takes no status: the run's own error says why.
    if (sum_.status != "failed") end_run("failed", e.what());
  }
}

TrainSummary Loop::summarize(double wall_s) {
  TrainSummary& sum = sum_;
  sum.steps = st_.step;
  sum.tokens = st_.tokens;
  sum.best_val_loss = st_.best_val_loss;
  sum.best_val_step = st_.best_val_step;
  sum.wall_s = wall_s;
  sum.tokens_per_s = st_.elapsed_s > 0 ? static_cast<double>(st_.tokens) / st_.elapsed_s : 0;
  sum.checkpoint = last_checkpoint_;
  if (sum.status == "completed" && std::isnan(sum.train_loss) && std::isnan(sum.val_loss)) {
    // A finished run resumed: no step and no validation ran in this process.
    log(fmt::format("completed: the run was already at step {} of {}; nothing left to train | best val loss {:.4f} at step {} "
                    "| run {} | checkpoint {}",
                    sum.steps, c_.train.max_steps, sum.best_val_loss, sum.best_val_step, o_.run_dir,
                    last_checkpoint_.empty() ? "none" : last_checkpoint_));
    return sum;
  }
  log(fmt::format("{}: {} steps, {} tokens in {} ({} tok/s) | train loss {:.4f} | val loss {:.4f} (best {:.4f} at step {}{}) | "
                  "run {} | checkpoint {}",
                  sum.status, sum.steps, format_count(static_cast<double>(sum.tokens)), format_duration(st_.elapsed_s),
                  format_count(sum.tokens_per_s), sum.train_loss, sum.val_loss, sum.best_val_loss, sum.best_val_step,
                  std::isnan(unigram_) ? "" : fmt::format("; unigram {:.4f}", unigram_), o_.run_dir,
                  last_checkpoint_.empty() ? "none" : last_checkpoint_));
  if (!sum.message.empty()) log(sum.message);
  return sum;
}

}  // namespace

TrainSummary train(const Config& config, const TrainOptions& options) {
  Config resolved = config;
  resolve_data_settings(resolved);  // the vocabulary follows the data
  Loop loop(resolved, options);
  return loop.run();
}

Config load_run_config(const std::string& run_dir, const std::vector<std::string>& overrides) {
  const std::string path = (fs::path(run_dir) / "config.yaml").string();
  if (!fs::exists(path))
    throw Error("no config.yaml in the run directory", run_dir, "pass the run directory that prism train created (--out)");
  return compose_run_config(path, overrides);
}

}  // namespace prism
