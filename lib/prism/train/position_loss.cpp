#include "prism/train/position_loss.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "prism/error.h"

namespace prism {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Bucket b's column of per-batch values.
std::vector<double> column(const PositionLoss& p, int64_t b) {
  std::vector<double> out;
  const int64_t n = p.buckets();
  for (int64_t i = 0; i < p.batches(); ++i) out.push_back(p.by_batch[static_cast<size_t>(i * n + b)]);
  return out;
}

double mean(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return x.empty() ? kNaN : s / static_cast<double>(x.size());
}

// Standard error of the mean (sample sd / sqrt(n)); NaN below 2 values.
double stderr_of(const std::vector<double>& x) {
  if (x.size() < 2) return kNaN;
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(x.size() - 1) / static_cast<double>(x.size()));
}

// The back ends of the layers, "fused" or "fused, reference" when they differ.
std::string backends_of(const std::vector<attention::Backend>& per_layer) {
  std::vector<std::string> names;
  for (auto b : per_layer)
    if (std::find(names.begin(), names.end(), attention::backend_name(b)) == names.end())
      names.push_back(attention::backend_name(b));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::vector<int64_t> position_bucket_edges(int64_t T) {
  if (T < 1) throw Error(fmt::format("a window of {} tokens", T), "position buckets", "use a positive context");
  std::vector<int64_t> e{0};
  for (int64_t next = 1; next < T; next *= 2) e.push_back(next);
  e.push_back(T);
  return e;
}

std::vector<double> PositionLoss::loss() const {
  std::vector<double> out;
  for (int64_t b = 0; b < buckets(); ++b) out.push_back(batches() ? mean(column(*this, b)) : kNaN);
  return out;
}

std::vector<double> PositionLoss::loss_se() const {
  std::vector<double> out;
  for (int64_t b = 0; b < buckets(); ++b) out.push_back(stderr_of(column(*this, b)));
  return out;
}

double PositionLoss::overall() const {
  const auto l = loss();
  double sum = 0;
  for (int64_t b = 0; b < buckets(); ++b)
    sum += l[static_cast<size_t>(b)] * static_cast<double>(bucket_edges[b + 1] - bucket_edges[b]);
  return context > 0 ? sum / static_cast<double>(context) : kNaN;
}

PositionLoss measure_position_loss(GPT& model, TokenLoader& loader, const PositionLossOptions& options) {
  const int64_t T = loader.options().seq_len;
  const auto& cfg = model->config();
  if (cfg.position == Positions::Learned && T > cfg.block_size)
    throw Error(fmt::format("a window of {} tokens, and the model's learned positions stop at block_size {}", T,
                            cfg.block_size),
                "--context",
                fmt::format("use --context <= {}; to measure how learned positions extrapolate, train with "
                            "model.block_size above train.seq_len (positions past it stay untrained), or use "
                            "model.position: rope",
                            cfg.block_size));
  torch::NoGradGuard no_grad;
  model->eval();
  PositionLoss p;
  p.context = T;
  p.batch = loader.options().batch;
  p.bucket_edges = position_bucket_edges(T);
  p.heads = model->schedule().heads();
  p.block_size = cfg.block_size;
  p.position = cfg.position == Positions::Rope ? "rope" : "learned";
  ForwardOptions pass;
  pass.backend = options.backend;
  pass.token_losses = true;
  p.backend = backends_of(model->resolved_backends(T, pass));
  p.dtype = options.execution && options.execution->bf16 ? "bf16 autocast" : "fp32";
  const int64_t n = p.buckets();
  auto device = model->wte->weight.device();
  // Buckets as a (T, buckets) 0/1 matrix: one matmul sums a batch's positions per bucket.
  auto bucket_of = torch::zeros({T, n}, torch::kDouble);
  for (int64_t b = 0; b < n; ++b) bucket_of.slice(0, p.bucket_edges[b], p.bucket_edges[b + 1]).select(1, b).fill_(1.0);
  bucket_of = bucket_of.to(device);
  for (int64_t i = 0; i < options.batches; ++i) {
    auto [x, y] = loader.next();
    x = x.to(device);
    y = y.to(device);
    torch::Tensor losses;
    {
      std::optional<AutocastScope> autocast;
      if (options.execution) autocast.emplace(*options.execution);
      losses = model->forward(x, y, pass).token_loss;
    }
    auto counted = (y >= 0).to(torch::kDouble).sum(0);                        // (T)
    auto sums = torch::matmul(losses.to(torch::kDouble).sum(0), bucket_of);   // (buckets)
    auto means = (sums / torch::matmul(counted, bucket_of)).cpu().contiguous();  // 0 / 0: NaN
    p.by_batch.insert(p.by_batch.end(), means.data_ptr<double>(), means.data_ptr<double>() + n);
    if (options.progress) options.progress(i + 1, options.batches);
  }
  return p;
}

std::string position_bucket_label(int64_t lo, int64_t hi) {
  return hi - lo == 1 ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi - 1);
}

std::string position_loss_group(int64_t context) { return fmt::format("val/by_position/T{}", context); }

ResultGroup to_result_group(const PositionLoss& p) {
  ResultGroup g;
  const uint64_t n = static_cast<uint64_t>(p.buckets()), B = static_cast<uint64_t>(p.batches());
  g.text = {{"checkpoint", p.checkpoint}, {"data", p.data},     {"tokens_id", p.tokens_id}, {"backend", p.backend},
            {"position", p.position},     {"dtype", p.dtype},   {"source", p.source},
            {"definition", "cross-entropy of the next token at query position i (0-based) of each window, "
                           "pooled into buckets [bucket_lo, bucket_hi); loss: the mean over batches of each "
                           "batch's bucket mean; loss_se: its standard error over batches"}};
  g.numbers = {{"step", static_cast<double>(p.step)},
               {"context", static_cast<double>(p.context)},
               {"trained_context", static_cast<double>(p.trained_context)},
               {"block_size", static_cast<double>(p.block_size)},
               {"batch", static_cast<double>(p.batch)},
               {"batches", static_cast<double>(B)},
               {"loss_overall", p.overall()}};
  std::vector<int64_t> lo(p.bucket_edges.begin(), p.bucket_edges.end() - (n ? 1 : 0));
  std::vector<int64_t> hi(p.bucket_edges.begin() + (n ? 1 : 0), p.bucket_edges.end());
  g.set_integer("bucket_lo", {n}, lo);
  g.set_integer("bucket_hi", {n}, hi);
  g.set_real("loss", {n}, p.loss());
  g.set_real("loss_se", {n}, p.loss_se());
  g.set_real("loss_by_batch", {B, n}, p.by_batch);
  std::vector<int64_t> heads(p.heads.begin(), p.heads.end());
  g.set_integer("heads", {static_cast<uint64_t>(heads.size())}, heads);
  return g;
}

PositionLoss position_loss_from_group(const ResultGroup& g, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return Error(what, where, "measure it again with prism eval RUN --position-loss");
  };
  if (!g.has("bucket_lo") || !g.has("loss_by_batch")) throw bad("not a position loss group (no bucket_lo or loss_by_batch)");
  PositionLoss p;
  auto text = [&](const char* k) { return g.text.count(k) ? g.text.at(k) : std::string(); };
  auto number = [&](const char* k) { return g.numbers.count(k) ? static_cast<int64_t>(g.numbers.at(k)) : int64_t{0}; };
  p.checkpoint = text("checkpoint");
  p.data = text("data");
  p.tokens_id = text("tokens_id");
  p.backend = text("backend");
  p.position = text("position");
  p.dtype = text("dtype");
  p.source = text("source");
  p.step = number("step");
  p.context = number("context");
  p.trained_context = number("trained_context");
  p.block_size = number("block_size");
  p.batch = number("batch");
  const auto lo = g.integers("bucket_lo", where), hi = g.integers("bucket_hi", where);
  if (lo.empty() || lo.size() != hi.size() || lo.front() != 0 || hi.back() != p.context)
    throw bad("bucket_lo / bucket_hi do not cover the context");
  p.bucket_edges = lo;
  p.bucket_edges.push_back(hi.back());
  for (size_t b = 0; b < lo.size(); ++b)
    if (hi[b] <= lo[b] || (b + 1 < lo.size() && lo[b + 1] != hi[b]))
      throw bad("position buckets that do not follow one another");
  p.by_batch = g.reals("loss_by_batch", where);
  if (p.by_batch.size() % lo.size() != 0)
    throw bad("loss_by_batch is not batches x buckets");
  if (g.has("heads"))
    for (int64_t h : g.integers("heads", where)) p.heads.push_back(static_cast<int>(h));
  return p;
}

std::string format_position_loss_table(const PositionLoss& p) {
  const auto loss = p.loss(), se = p.loss_se();
  std::string out = fmt::format("{:>13} {:>9} {:>9} {:>8} {:>10}\n", "positions", "tokens", "loss", "± SE", "vs pos 0");
  for (int64_t b = 0; b < p.buckets(); ++b) {
    const int64_t lo = p.bucket_edges[b], hi = p.bucket_edges[b + 1];
    const size_t k = static_cast<size_t>(b);
    const bool past = p.trained_context > 0 && hi > p.trained_context;
    out += fmt::format("{:>13} {:>9} {:>9.4f} {:>8} {:>+10.4f}{}\n", position_bucket_label(lo, hi),
                       (hi - lo) * p.batch * p.batches(), loss[k],
                       std::isnan(se[k]) ? std::string("-") : fmt::format("{:.4f}", se[k]), loss[k] - loss.front(),
                       past ? (lo >= p.trained_context ? "  past the trained context" : "  partly past it") : "");
  }
  out += fmt::format("{:>13} {:>9} {:>9.4f}\n", "all", p.context * p.batch * p.batches(), p.overall());
  return out;
}

}  // namespace prism
