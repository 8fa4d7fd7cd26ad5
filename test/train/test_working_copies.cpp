// bf16 training on working copies: the AdamW kernel (kernels/cpu/adamw.h) on
// every Highway target against its reference and ATen's fused AdamW, and a
// training step on working copies (prism/model/working_copies.h) against the
// plain autocast step it replaces, alone and under data parallelism.
#include <catch2/catch.hpp>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/adamw.h"
#include "prism/model/gpt.h"
#include "prism/model/working_copies.h"
#include "prism/train/distributed.h"
#include "prism/train/execution.h"
#include "prism/train/optimizer.h"
#include "prism/train/step.h"

using namespace prism;
namespace kc = prism::kernels::cpu;

namespace {

struct ForcedTarget {
  explicit ForcedTarget(const std::string& name) { kc::adamw_force_target(name); }
  ~ForcedTarget() { kc::adamw_force_target(""); }
};

struct Threads {
  explicit Threads(int n) : before(torch::get_num_threads()) { torch::set_num_threads(n); }
  ~Threads() { torch::set_num_threads(before); }
  int before;
};

struct State {
  torch::Tensor p, m, v, copy;
};

State run_kernel(const State& in, const torch::Tensor& grad, const kc::AdamWHyper& h, bool reference,
                 const kc::ExtraRows& extra = {}) {
  State s{in.p.clone(), in.m.clone(), in.v.clone(), torch::empty_like(in.p, torch::kBFloat16)};
  kc::AdamWTensor t;
  t.param = s.p.data_ptr<float>();
  if (grad.scalar_type() == torch::kBFloat16) t.grad_bf16 = reinterpret_cast<const uint16_t*>(grad.data_ptr());
  else t.grad_f32 = grad.data_ptr<float>();
  t.exp_avg = s.m.data_ptr<float>();
  t.exp_avg_sq = s.v.data_ptr<float>();
  t.copy_bf16 = reinterpret_cast<uint16_t*>(s.copy.data_ptr());
  t.n = s.p.numel();
  t.extra = extra;
  if (reference) kc::reference::adamw_step(t, h);
  else kc::adamw_step(t, h);
  return s;
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.numel() * a.element_size())) == 0;
}

// Within a few fp32 roundings of each element.
bool close(const torch::Tensor& got, const torch::Tensor& want) {
  return torch::allclose(got, want, /*rtol=*/2e-6, /*atol=*/1e-9);
}

}  // namespace

TEST_CASE("AdamW kernel: every SIMD target and the reference against ATen's fused AdamW", "[train][optimizer][kernels]") {
  const auto targets = kc::adamw_targets();
  REQUIRE(!targets.empty());
  // Lengths that are and are not whole vectors, and several OpenMP chunks with a partial last one.
  const int64_t n = GENERATE(1, 15, 16, 333, 40000);
  const auto grad_type = GENERATE(torch::kBFloat16, torch::kFloat);
  const double weight_decay = GENERATE(0.0, 0.1);
  const double grad_scale = GENERATE(1.0, 2.5);
  const int64_t step = GENERATE(1, 7);
  INFO("n " << n << ", grad " << grad_type << ", weight decay " << weight_decay << ", grad scale " << grad_scale
            << ", step " << step);
  torch::manual_seed(n + step);
  State in{torch::randn({n}), torch::randn({n}) * 0.01, torch::rand({n}) * 1e-4, {}};
  const auto grad = torch::randn({n}).to(grad_type);
  kc::AdamWHyper h;
  h.lr = 3e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.95;
  h.eps = 1e-8;
  h.weight_decay = weight_decay;
  h.step = step;
  h.grad_scale = grad_scale;

  // ATen's fused AdamW on the gradient in fp32 (a bf16 gradient widened: exact); a
  // copy, since it stores the divided gradient back.
  auto p = in.p.clone(), m = in.m.clone(), v = in.v.clone(), g = grad.to(torch::kFloat).clone();
  std::optional<torch::Tensor> scale;
  if (grad_scale != 1.0) scale = torch::full({}, grad_scale);
  at::_fused_adamw_({p}, {g}, {m}, {v}, {}, {torch::full({}, static_cast<double>(step))}, h.lr, h.beta1, h.beta2,
                    h.weight_decay, h.eps, false, false, scale);

  const State ref = run_kernel(in, grad, h, /*reference=*/true);
  CHECK(close(ref.p, p));
  CHECK(close(ref.m, m));
  CHECK(close(ref.v, v));
  CHECK(same_bits(ref.copy, ref.p.to(torch::kBFloat16)));  // the copy is the new weight rounded as autocast does
  for (const auto& target : targets) {
    INFO("target " << target);
    ForcedTarget forced(target);
    const State got = run_kernel(in, grad, h, false);
    CHECK(close(got.p, ref.p));
    CHECK(close(got.m, ref.m));
    CHECK(close(got.v, ref.v));
    CHECK(same_bits(got.copy, got.p.to(torch::kBFloat16)));
    CHECK(got.p.ne(in.p).any().item<bool>());  // it stepped
  }
  // Each element's result does not depend on the thread count (exact resume on another machine size).
  const State one = [&] { Threads t(1); return run_kernel(in, grad, h, false); }();
  const State three = [&] { Threads t(3); return run_kernel(in, grad, h, false); }();
  CHECK(same_bits(one.p, three.p));
  CHECK(same_bits(one.v, three.v));
}

TEST_CASE("AdamW kernel: extra fp32 rows on a bf16 gradient, as the tied embedding's sparse rows", "[train][optimizer][kernels]") {
  // (rows, cols) with a row length that is not a whole number of vectors; some rows get extras.
  const int64_t rows = 37, cols = GENERATE(5, 48, 333);
  INFO("cols " << cols);
  torch::manual_seed(cols);
  const int64_t n = rows * cols;
  State in{torch::randn({n}), torch::randn({n}) * 0.01, torch::rand({n}) * 1e-4, {}};
  const auto grad = torch::randn({n}).to(torch::kBFloat16);
  const std::vector<int64_t> touched = {0, 3, 4, 20, 36};
  auto values = torch::randn({static_cast<int64_t>(touched.size()), cols});
  std::vector<const float*> row_ptr(static_cast<size_t>(rows), nullptr);
  auto dense = grad.to(torch::kFloat).view({rows, cols}).clone();  // the same gradient, summed in fp32
  for (size_t i = 0; i < touched.size(); ++i) {
    row_ptr[static_cast<size_t>(touched[i])] = values.data_ptr<float>() + static_cast<int64_t>(i) * cols;
    dense[touched[i]] += values[static_cast<int64_t>(i)];
  }
  const kc::ExtraRows extra{cols, row_ptr.data()};
  kc::AdamWHyper h;
  h.lr = 3e-3;
  h.beta2 = 0.95;
  h.weight_decay = 0.1;
  h.step = 3;
  h.grad_scale = 1.7;
  const auto flat = dense.reshape({n}).contiguous();
  const State want = run_kernel(in, flat, h, /*reference=*/true);
  const double want_sq = flat.to(torch::kDouble).pow(2).sum().item<double>();
  const State ref = run_kernel(in, grad, h, true, extra);
  CHECK(close(ref.p, want.p));
  CHECK(close(ref.v, want.v));
  CHECK(std::abs(kc::reference::sum_squares_bf16(reinterpret_cast<const uint16_t*>(grad.data_ptr()), n, extra) - want_sq) <
        1e-9 * want_sq);
  for (const auto& target : kc::adamw_targets()) {
    INFO("target " << target);
    ForcedTarget forced(target);
    const State got = run_kernel(in, grad, h, false, extra);
    CHECK(close(got.p, want.p));
    CHECK(close(got.m, want.m));
    CHECK(close(got.v, want.v));
    CHECK(same_bits(got.copy, got.p.to(torch::kBFloat16)));
    const double sq = kc::sum_squares_bf16(reinterpret_cast<const uint16_t*>(grad.data_ptr()), n, extra);
    CHECK(std::abs(sq - want_sq) < 1e-5 * want_sq);
  }
}

TEST_CASE("AdamW kernel: a bf16 gradient's sum of squares, the same bits on any thread count", "[train][optimizer][kernels]") {
  const int64_t n = GENERATE(1, 17, 40000, 100003);
  torch::manual_seed(n);
  const auto g = (torch::randn({n}) * 3).to(torch::kBFloat16);
  const double want = g.to(torch::kDouble).pow(2).sum().item<double>();
  CHECK(std::abs(kc::reference::sum_squares_bf16(reinterpret_cast<const uint16_t*>(g.data_ptr()), n) - want) <
        1e-9 * want);
  for (const auto& target : kc::adamw_targets()) {
    INFO("target " << target);
    ForcedTarget forced(target);
    const auto* x = reinterpret_cast<const uint16_t*>(g.data_ptr());
    const double got = kc::sum_squares_bf16(x, n);
    CHECK(std::abs(got - want) < 1e-5 * want);  // fp32 sums of 256 values at most, then double
    const double one = [&] { Threads t(1); return kc::sum_squares_bf16(x, n); }();
    const double three = [&] { Threads t(3); return kc::sum_squares_bf16(x, n); }();
    CHECK(std::memcmp(&one, &three, sizeof one) == 0);
    CHECK(std::memcmp(&one, &got, sizeof one) == 0);
  }
}

namespace {

struct Fixture {
  ModelConfig mc = [] {
    ModelConfig c = model_preset("cpu-128");
    c.vocab_size = 512;
    c.n_layer = 2;
    return c;
  }();
  HeadSchedule schedule = HeadSchedule::parse("1x1,4x1");
  TrainConfig tc = [] {
    TrainConfig t;
    t.dtype = "bf16";
    t.threads = 2;
    t.lr = 3e-3;
    return t;
  }();
  torch::Tensor idx, targets;
  Fixture() {
    torch::manual_seed(11);
    auto pool = torch::randint(0, mc.vocab_size, {4, 4, 65}, torch::kLong);
    idx = pool.narrow(2, 0, 64);
    targets = pool.narrow(2, 1, 64);
  }
  GPT model() const {
    torch::manual_seed(3);
    return GPT(mc, schedule);
  }
};

// The step before working copies: autocast casts the weights in the forward and
// their gradients back in the backward; clip_grad_norm_ and ATen's fused AdamW.
double autocast_step(GPT& model, torch::optim::Optimizer& opt, const Execution& exec, const torch::Tensor& x,
                     const torch::Tensor& y, double clip, double* norm) {
  opt.zero_grad(true);
  model->train();
  torch::Tensor loss;
  {
    AutocastScope autocast(exec);
    loss = model->forward(x, y).loss;
  }
  loss.backward();
  *norm = torch::nn::utils::clip_grad_norm_(model->parameters(), clip);
  opt.step();
  return loss.item<double>();
}

// Two models with the same initial weights, each with its AdamW: a trains on working
// copies (optimizer_step), b with the autocast step.
struct TwoRuns {
  Fixture f;
  Execution exec = resolve_execution(f.tc);
  GPT a = f.model(), b = f.model();
  std::unique_ptr<torch::optim::AdamW> opt_a = make_adamw(*a, f.tc), opt_b = make_adamw(*b, f.tc);
  TwoRuns() { REQUIRE(exec.bf16); }
};

// `to` takes `from`'s weights and AdamW state (moments and step count), bit for bit.
void copy_training_state(GPT& from, torch::optim::Optimizer& from_opt, GPT& to, torch::optim::Optimizer& to_opt) {
  torch::NoGradGuard no_grad;
  const auto pf = from->parameters(), pt = to->parameters();
  REQUIRE(pf.size() == pt.size());
  for (size_t i = 0; i < pf.size(); ++i) {
    pt[i].copy_(pf[i]);
    const auto it = from_opt.state().find(pf[i].unsafeGetTensorImpl());
    if (it == from_opt.state().end()) continue;  // before the first step
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    auto copy = std::make_unique<torch::optim::AdamWParamState>();
    copy->step(s.step());
    copy->exp_avg(s.exp_avg().clone());
    copy->exp_avg_sq(s.exp_avg_sq().clone());
    if (s.max_exp_avg_sq().defined()) copy->max_exp_avg_sq(s.max_exp_avg_sq().clone());
    to_opt.state()[pt[i].unsafeGetTensorImpl()] = std::move(copy);
  }
}

// After one step of each from the same state: how far a's AdamW moments are from
// b's (the largest difference in each tensor, relative to b's largest value), and
// a's weights from b's where the update is well conditioned: sqrt(v_hat) at
// least 10 eps. Where a weight's gradients have all been within a few eps of
// zero (the tied embedding's two gradients, the lookup's and the LM head's, can
// cancel to that), AdamW divides a rounding-sized m by a rounding-sized sqrt(v),
// and fp32 rounding of the gradient moves the weight by a fraction of lr. (The
// elements left out: 5% of this model's over 12 steps, 3 eps would leave out as
// many and 1e3 eps 7%, each with the same largest difference elsewhere.)
struct StepDifference {
  double moments = 0;      // relative, largest over m and v
  double conditioned = 0;  // absolute weight difference, well-conditioned elements
  double all = 0;          // absolute weight difference, every element
};

StepDifference step_difference(GPT& a, torch::optim::Optimizer& opt_a, GPT& b, torch::optim::Optimizer& opt_b,
                               const TrainConfig& tc) {
  torch::NoGradGuard no_grad;
  const auto pa = a->parameters(), pb = b->parameters();
  StepDifference d;
  for (size_t i = 0; i < pa.size(); ++i) {
    const auto& sa = static_cast<const torch::optim::AdamWParamState&>(*opt_a.state().at(pa[i].unsafeGetTensorImpl()));
    const auto& sb = static_cast<const torch::optim::AdamWParamState&>(*opt_b.state().at(pb[i].unsafeGetTensorImpl()));
    REQUIRE(sa.step() == sb.step());
    for (const auto& [ma, mb] : {std::make_pair(sa.exp_avg(), sb.exp_avg()),
                                 std::make_pair(sa.exp_avg_sq(), sb.exp_avg_sq())}) {
      const double scale = mb.abs().max().item<double>();
      if (scale > 0) d.moments = std::max(d.moments, (ma - mb).abs().max().item<double>() / scale);
    }
    const double bc2 = 1.0 - std::pow(tc.beta2, static_cast<double>(sb.step()));
    const auto conditioned = (sb.exp_avg_sq() / bc2).sqrt() >= 10 * tc.eps;
    const auto w = (pa[i] - pb[i]).abs();
    d.all = std::max(d.all, w.max().item<double>());
    d.conditioned = std::max(d.conditioned, (w * conditioned).max().item<double>());
  }
  return d;
}

double max_abs_difference(GPT& a, GPT& b) {
  const auto pa = a->parameters(), pb = b->parameters();
  double d = 0;
  for (size_t i = 0; i < pa.size(); ++i) d = std::max(d, (pa[i] - pb[i]).abs().max().item<double>());
  return d;
}

}  // namespace

// The step on working copies against the autocast step from the same weights and
// optimizer state, at each of 12 steps of a run: the precise statement of "the
// same step". (The test below follows the two runs apart, where rounding
// differences compound.)
TEST_CASE("each bf16 step on working copies is the autocast step, from the same state, to fp32 rounding",
          "[train][optimizer][bf16]") {
  TwoRuns t;
  Fixture& f = t.f;
  const Execution& exec = t.exec;
  GPT &a = t.a, &b = t.b;
  auto &opt_a = t.opt_a, &opt_b = t.opt_b;
  const double clip = 1.0;
  int64_t s = 0;
  BatchSource next = [&] { return std::make_pair(f.idx[s % 4], f.targets[s % 4]); };
  for (s = 0; s < 12; ++s) {
    copy_training_state(a, *opt_a, b, *opt_b);
    REQUIRE(max_abs_difference(a, b) == 0);
    const StepResult r = optimizer_step(a, *opt_a, exec, next, 1, clip);
    double norm_b = 0;
    const double loss_b = autocast_step(b, *opt_b, exec, f.idx[s % 4], f.targets[s % 4], clip, &norm_b);
    const double dn = std::abs(r.grad_norm - norm_b) / norm_b;
    const StepDifference d = step_difference(a, *opt_a, b, *opt_b, f.tc);
    INFO("step " << s << ": loss " << r.loss << " vs " << loss_b << ", grad norm " << r.grad_norm << " vs " << norm_b
                 << ", moments " << d.moments << " apart (relative), weights " << d.conditioned
                 << " apart where the update is well conditioned, " << d.all << " anywhere");
    CHECK(r.loss == loss_b);  // the copies are the masters rounded to bf16, as autocast's casts
    CHECK(dn < 1e-5);  // measured: 1e-6 at most
    // The gradients are the same sums in another order (our kernel adds the
    // embedding's coalesced rows to the LM head's bf16 gradient; autograd adds
    // the lookup's gradient into the LM head's as it arrives): the moments agree
    // to fp32 rounding.
    CHECK(d.moments < 1e-5);  // measured (Zen 5): 2.6e-6 at most
    // AdamW moves a weight by about lr = 3e-3 a step; where the update is well
    // conditioned the two kernels' results differ by fp32 rounding of that
    // update, not by a fraction of it. (Anywhere: 7.4e-6 at step 0 on a Zen 5,
    // one embedding weight whose two gradients cancel to 5e-9.)
    CHECK(d.conditioned < 1e-6);  // measured (GCC 12, AVX-512): 1.2e-7 at most, one ulp of a LayerNorm weight near 1
  }
}

TEST_CASE("bf16 training on working copies follows the autocast step it replaces", "[train][optimizer][bf16]") {
  TwoRuns t;
  Fixture& f = t.f;
  const Execution& exec = t.exec;
  GPT &a = t.a, &b = t.b;
  auto &opt_a = t.opt_a, &opt_b = t.opt_b;
  const double clip = 1.0;
  int64_t s = 0;
  BatchSource next = [&] { return std::make_pair(f.idx[s % 4], f.targets[s % 4]); };
  double first = 0, last = 0;
  for (s = 0; s < 12; ++s) {
    const StepResult r = optimizer_step(a, *opt_a, exec, next, 1, clip);
    double norm_b = 0;
    const double loss_b = autocast_step(b, *opt_b, exec, f.idx[s % 4], f.targets[s % 4], clip, &norm_b);
    INFO("step " << s << ": loss " << r.loss << " vs " << loss_b << ", grad norm " << r.grad_norm << " vs " << norm_b);
    if (s == 0) {
      // Same weights: the forward on the copies is autocast's, bit for bit, and so is the loss.
      CHECK(r.loss == loss_b);
      CHECK(std::abs(r.grad_norm - norm_b) < 1e-5 * norm_b);
      first = r.loss;
    }
    // Apart, the runs drift: a one-ulp difference in a master can round its bf16
    // copy the other way (a 2^-8 relative change), and 12 steps at lr 3e-3 on four
    // repeated batches compound that. The drift depends on the compiler's float
    // contraction (clang: 2.2e-3 by step 9); the test above holds each step to
    // rounding, so this bound only says the runs stay together.
    CHECK(std::abs(r.loss - loss_b) < 5e-3);
    CHECK(std::abs(r.grad_norm - norm_b) < 2e-2 * std::max(1.0, norm_b));
    last = r.loss;
  }
  CHECK(last < first - 0.5);  // it learned the repeated batches
  // The copies were used, and each is its master rounded to bf16.
  auto* fused = dynamic_cast<FusedAdamW*>(opt_a.get());
  REQUIRE(fused);
  REQUIRE(fused->working_copies());
  for (auto& e : fused->working_copies()->entries())
    CHECK(same_bits(e.copy.detach(), e.master.detach().to(torch::kBFloat16)));
  // c_attn, c_proj, c_fc and the MLP's c_proj of each layer, and the tied embedding.
  CHECK(static_cast<int>(fused->working_copies()->entries().size()) == 4 * f.mc.n_layer + 1);
}

TEST_CASE("a working copy whose master changed is written again before use", "[train][optimizer][bf16]") {
  Fixture f;
  const Execution exec = resolve_execution(f.tc);
  auto model = f.model();
  auto opt = make_adamw(*model, f.tc);
  int64_t s = 0;
  BatchSource next = [&] { return std::make_pair(f.idx[s % 4], f.targets[s % 4]); };
  for (s = 0; s < 2; ++s) optimizer_step(model, *opt, exec, next, 1, 1.0);
  {
    torch::NoGradGuard no_grad;  // a checkpoint load, or any in-place edit of the weights
    for (auto& p : model->parameters()) p.add_(0.01);
  }
  auto* copies = dynamic_cast<FusedAdamW*>(opt.get())->working_copies();
  REQUIRE(copies);
  model->eval();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(exec);
  const auto plain = model->forward(f.idx[0], f.targets[0]).loss;
  ForwardOptions on;
  on.working_copies = copies;
  const auto on_copies = model->forward(f.idx[0], f.targets[0], on).loss;
  CHECK(on_copies.item<double>() == plain.item<double>());
  for (auto& e : copies->entries()) CHECK(same_bits(e.copy.detach(), e.master.detach().to(torch::kBFloat16)));
}

TEST_CASE("gradient accumulation on working copies sums the micro-batches in fp32", "[train][optimizer][bf16]") {
  Fixture f;
  const Execution exec = resolve_execution(f.tc);
  auto a = f.model(), b = f.model();
  auto opt_a = make_adamw(*a, f.tc), opt_b = make_adamw(*b, f.tc);
  int64_t i = 0;
  BatchSource next = [&] {
    auto r = std::make_pair(f.idx[i % 4], f.targets[i % 4]);
    ++i;
    return r;
  };
  // a: two micro-batches per step on copies; b: the same two, autocast, by hand.
  for (int step = 0; step < 3; ++step) {
    const StepResult r = optimizer_step(a, *opt_a, exec, next, 2, 0.0);
    opt_b->zero_grad(true);
    double sum = 0;
    for (int m = 0; m < 2; ++m) {
      const int64_t k = (2 * step + m) % 4;
      torch::Tensor loss;
      {
        AutocastScope autocast(exec);
        loss = b->forward(f.idx[k], f.targets[k]).loss;
      }
      (loss / 2.0).backward();
      sum += loss.item<double>();
    }
    opt_b->step();
    INFO("step " << step << ": " << r.loss << " vs " << sum / 2);
    if (step == 0) CHECK(std::abs(r.loss - sum / 2) < 1e-6);  // the same forward: the sums' rounding only
    CHECK(std::abs(r.loss - sum / 2) < 1e-3);
  }
  // Between steps the copies hold no gradient of their own: the micro-batches were folded into the masters.
  for (auto& e : dynamic_cast<FusedAdamW*>(opt_a.get())->working_copies()->entries())
    CHECK(!e.copy.grad().defined());
}

TEST_CASE("data parallelism on working copies: fp32 gradients averaged into the masters, the same step",
          "[train][optimizer][bf16][ddp]") {
  // A GradientSync over one process runs every part of the protocol (the hooks
  // on the copies and on the embedding's master, the fp32 buckets, the average
  // written into the masters) with a sum over one rank; 2 processes over Gloo
  // are test_ddp.cpp's. Its step must be the one without it.
  Fixture f;
  const Execution exec = resolve_execution(f.tc);
  for (const int64_t accum : {1, 2}) {
    INFO("micro-batches per step: " << accum);
    auto a = f.model(), b = f.model();
    auto opt_a = make_adamw(*a, f.tc), opt_b = make_adamw(*b, f.tc);
    std::vector<torch::Tensor> params;
    for (auto& p : a->parameters()) params.push_back(p);
    GradientSync sync(ProcessGroup::single(), params, /*bucket_bytes=*/64 << 10, /*first_bucket_bytes=*/4 << 10);
    REQUIRE(sync.bucket_count() > 2);
    int64_t ia = 0, ib = 0;
    BatchSource next_a = [&] { auto r = std::make_pair(f.idx[ia % 4], f.targets[ia % 4]); ++ia; return r; };
    BatchSource next_b = [&] { auto r = std::make_pair(f.idx[ib % 4], f.targets[ib % 4]); ++ib; return r; };
    for (int step = 0; step < 3; ++step) {
      const StepResult ra = optimizer_step(a, *opt_a, exec, next_a, accum, 0.0, &sync);
      const StepResult rb = optimizer_step(b, *opt_b, exec, next_b, accum, 0.0);
      INFO("step " << step << ": loss " << ra.loss << " vs " << rb.loss << ", grad norm " << ra.grad_norm << " vs "
                   << rb.grad_norm);
      CHECK(ra.loss == rb.loss);
      CHECK(std::abs(ra.grad_norm - rb.grad_norm) < 1e-5 * rb.grad_norm);
    }
    CHECK(sync.stats().steps == 3);
    auto* copies = dynamic_cast<FusedAdamW*>(opt_a.get())->working_copies();
    REQUIRE(copies);
    CHECK(static_cast<int>(copies->entries().size()) == 4 * f.mc.n_layer + 1);
    for (auto& e : copies->entries()) {
      // The average went to the master, dense fp32; the copy's own gradient was cleared.
      CHECK(!e.copy.grad().defined());
      REQUIRE(e.master.grad().defined());
      CHECK(!e.master.grad().is_sparse());
      CHECK(e.master.grad().scalar_type() == torch::kFloat);
      CHECK(same_bits(e.copy.detach(), e.master.detach().to(torch::kBFloat16)));
    }
    // The same weights, bit for bit: the sync sums a copy's gradient and the
    // embedding's rows (summed per row first) in the order the optimizer does.
    auto pa = a->parameters(), pb = b->parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t k = 0; k < pa.size(); ++k) {
      INFO("parameter " << k);
      CHECK(same_bits(pa[k].detach(), pb[k].detach()));
    }
  }
}
