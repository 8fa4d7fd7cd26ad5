// The fused CPU kernel beyond the shape grid: every code path (instruction
// set) this CPU runs against the fp64 truth and the scalar reference, odd
// shapes and strides, thread counts, distance telemetry from explicit
// probabilities (and its precision for a local head at long context), and
// memory that grows with T (never T x T).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "ops/attention_testing.h"
#include "prism/ops/allocation_tracker.h"
#include "prism/ops/attention.h"
#include "prism/ops/cpu_code_paths.h"
#include "prism/ops/attention_fused.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;

namespace {

// The fused kernel on one code path ("" = the default one).
Attend fused(const std::string& code_path = "", int threads = 0, bool distance = true) {
  return [=](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
    attention::FusedOptions o;
    o.want_distance = distance;
    o.code_path = code_path;
    o.num_threads = threads;
    return attention::fused_attention(q, k, v, o);
  };
}

// Every code path this CPU runs, the scalar reference included.
std::vector<std::string> runnable_code_paths() {
  std::vector<std::string> names;
  for (const auto& p : attention::cpu_code_paths())
    if (p.supported) names.push_back(p.name);
  return names;
}

void check_result(const std::string& where, const AttentionResult& got, const AttentionResult& truth, bool bf16) {
  auto check = bf16 ? check_bf16 : check_fp32;
  check(where + ": output", got.out, truth.out);
  check(where + ": dq", got.dq, truth.dq);
  check(where + ": dk", got.dk, truth.dk);
  check(where + ": dv", got.dv, truth.dv);
  if (got.distance.defined())
    check_close(where + ": distance", got.distance, truth.distance, bf16 ? 2e-2 : 1e-5, bf16 ? 2e-2 : 1e-4);
}

void check_against_truth(const std::string& where, const Qkv& in, const torch::Tensor& dout, const Attend& attend) {
  auto truth = reference_fp64(in.q, in.k, in.v, dout);
  auto got = run_with_grads(in.q, in.k, in.v, dout, attend);
  check_result(where, got, truth, in.q.scalar_type() == torch::kBFloat16);
}

}  // namespace

TEST_CASE("every code path this CPU runs matches the fp64 truth and the scalar reference", "[attention]") {
  torch::manual_seed(11);
  const auto paths = runnable_code_paths();
  for (const auto& p : attention::cpu_code_paths())
    if (!p.supported) WARN(fmt::format("code path {} not supported by this CPU: not tested here", p.name));
  REQUIRE(paths.back() == "scalar");
  // Head dims: odd (24), every compiled instance (8, 16, 32, 64, 128, 256) and a generic one (96);
  // lengths: one partial tile, several tiles with a ragged end.
  struct Shape {
    int64_t B, T, H, D;
  };
  for (auto dtype : {torch::kFloat, torch::kBFloat16})
    for (Shape s : {Shape{2, 7, 2, 24}, Shape{2, 65, 4, 8}, Shape{1, 130, 3, 16}, Shape{2, 65, 2, 32},
                    Shape{1, 130, 2, 64}, Shape{2, 130, 1, 96}, Shape{1, 70, 1, 128}, Shape{1, 70, 1, 256}}) {
      auto in = make_qkv(s.B, s.T, s.H, s.D, dtype);
      auto dout = torch::randn({s.B, s.T, s.H, s.D}, torch::kDouble).to(dtype);
      const bool bf16 = dtype == torch::kBFloat16;
      const auto truth = reference_fp64(in.q, in.k, in.v, dout);
      const auto scalar = run_with_grads(in.q, in.k, in.v, dout, fused("scalar"));
      for (const auto& path : paths) {
        const std::string where = fmt::format("{} {} B={} T={} H={} D={}", path, c10::toString(dtype), s.B, s.T, s.H, s.D);
        const auto got = path == "scalar" ? scalar : run_with_grads(in.q, in.k, in.v, dout, fused(path));
        check_result(where, got, truth, bf16);
        if (path == "scalar") continue;
        // Against the scalar reference on the same inputs, too: SIMD and scalar agree as closely as fp32 allows.
        check_result(where + " vs scalar", got, scalar, bf16);
      }
    }
}

TEST_CASE("the fused kernel's code paths are listed, and a bad one is refused with the choices", "[attention]") {
  const auto paths = attention::cpu_code_paths();
  REQUIRE(!paths.empty());
  CHECK(paths.back().name == "scalar");
  CHECK(paths.back().supported);
  CHECK_FALSE(paths.back().auto_eligible);
  const auto def = attention::default_cpu_code_path();
  CHECK(def.supported);
  CHECK(def.name != "scalar");  // the reference is never the default
  try {
    attention::cpu_code_path("avx9000", "test");
    FAIL("no prism::Error for an unknown code path");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("avx9000") != std::string::npos);
    CHECK(e.fix().find(def.name) != std::string::npos);
  }
  auto in = make_qkv(1, 8, 1, 16, torch::kFloat);
  attention::FusedOptions o;
  o.code_path = "avx9000";
  CHECK_THROWS_AS(attention::fused_attention(in.q, in.k, in.v, o), Error);
}

TEST_CASE("fused attention handles odd shapes", "[attention]") {
  torch::manual_seed(12);
  struct Shape {
    int64_t B, T, H, D;
  };
  // Head dims that are not multiples of 16; T not a multiple of the 64-row tile;
  // batch 1; one head as wide as d_model (768: wider than the fast paths).
  for (Shape s : {Shape{1, 129, 3, 8}, Shape{3, 67, 2, 100}, Shape{1, 200, 1, 384}, Shape{1, 100, 1, 768},
                  Shape{2, 1, 4, 16}, Shape{1, 64, 5, 1}})
    for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
      auto in = make_qkv(s.B, s.T, s.H, s.D, dtype);
      auto dout = torch::randn({s.B, s.T, s.H, s.D}, torch::kDouble).to(dtype);
      check_against_truth(fmt::format("{} B={} T={} H={} D={}", c10::toString(dtype), s.B, s.T, s.H, s.D), in, dout,
                          fused());
    }
}

TEST_CASE("fused attention is as accurate as fp32 allows on a peaked softmax", "[attention]") {
  torch::manual_seed(13);
  // Scores with standard deviation ~8: each row is dominated by a few keys and
  // the running maximum changes from tile to tile. Scores this large cost any
  // fp32 implementation ~1e-5 relative, so the bound is the fp32 reference's own
  // error against the fp64 truth.
  auto in = make_qkv(1, 300, 2, 64, torch::kFloat, /*scale=*/2.8);
  auto dout = torch::randn({1, 300, 2, 64}, torch::kDouble).to(torch::kFloat);
  auto truth = reference_fp64(in.q, in.k, in.v, dout);
  auto ref32 = run_with_grads(in.q, in.k, in.v, dout, [](auto& q, auto& k, auto& v) {
    return attention::reference_attention(q, k, v, 0.0, true);
  });
  auto got = run_with_grads(in.q, in.k, in.v, dout, fused());
  auto err = [](const torch::Tensor& a, const torch::Tensor& e) {
    return (a.to(torch::kDouble) - e.to(torch::kDouble)).abs().max().item<double>();
  };
  const std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>> parts[] = {
      {"output", {got.out, ref32.out}}, {"dq", {got.dq, ref32.dq}}, {"dk", {got.dk, ref32.dk}},
      {"dv", {got.dv, ref32.dv}}, {"distance", {got.distance, ref32.distance}}};
  const torch::Tensor* truths[] = {&truth.out, &truth.dq, &truth.dk, &truth.dv, &truth.distance};
  for (size_t i = 0; i < 5; ++i) {
    const double fused_err = err(parts[i].second.first, *truths[i]), ref_err = err(parts[i].second.second, *truths[i]);
    INFO(parts[i].first << ": fused max error " << fused_err << ", fp32 reference " << ref_err);
    CHECK(fused_err <= 1.5 * ref_err + 1e-6);
  }
}

TEST_CASE("fused attention reads any (B, T, H) strides and copies only a strided D", "[attention]") {
  torch::manual_seed(14);
  const int64_t B = 2, T = 70, H = 3, D = 32;
  auto truth_in = make_qkv(B, T, H, D, torch::kFloat);
  auto dout = torch::randn({B, T, H, D}, torch::kDouble).to(torch::kFloat);
  auto truth = reference_fp64(truth_in.q, truth_in.k, truth_in.v, dout);

  SECTION("separate contiguous q, k, v") {
    auto got = run_with_grads(truth_in.q.contiguous(), truth_in.k.contiguous(), truth_in.v.contiguous(), dout, fused());
    check_fp32("output", got.out, truth.out);
    check_fp32("dk", got.dk, truth.dk);
  }
  SECTION("(B, H, T, D) storage seen as (B, T, H, D)") {
    auto q = truth_in.q.detach().transpose(1, 2).contiguous().transpose(1, 2);
    auto k = truth_in.k.detach().transpose(1, 2).contiguous().transpose(1, 2);
    auto v = truth_in.v.detach().transpose(1, 2).contiguous().transpose(1, 2);
    auto got = run_with_grads(q, k, v, dout, fused());
    check_fp32("output", got.out, truth.out);
    check_fp32("dq", got.dq, truth.dq);
    check_fp32("dv", got.dv, truth.dv);
  }
  SECTION("non-unit stride along D is copied, not misread") {
    auto q = truth_in.q.detach().transpose(2, 3).contiguous().transpose(2, 3);
    REQUIRE(q.stride(3) != 1);
    auto got = run_with_grads(q, truth_in.k, truth_in.v, dout, fused());
    check_fp32("output", got.out, truth.out);
    check_fp32("dq", got.dq, truth.dq);
  }
  SECTION("a non-contiguous upstream gradient") {
    auto qq = truth_in.q.detach().requires_grad_();
    auto o = attention::fused_attention(qq, truth_in.k.detach(), truth_in.v.detach()).out;
    // Gradient flows back through a transpose: dout arrives with (B, H, T, D) strides.
    o.transpose(1, 2).backward(dout.to(torch::kFloat).transpose(1, 2).contiguous());
    check_fp32("dq", qq.grad(), truth.dq);
  }
}

TEST_CASE("fused attention gives the same result on any thread count", "[attention]") {
  torch::manual_seed(15);
  // One (b, h) pair: with 3 threads its key blocks are split over work items
  // whose dq partial sums are added at the end.
  for (auto dtype : {torch::kFloat, torch::kBFloat16})
    for (auto [B, H] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}}) {
      auto in = make_qkv(B, 333, H, 64, dtype);
      auto dout = torch::randn({B, 333, H, 64}).to(dtype);
      auto one = run_with_grads(in.q, in.k, in.v, dout, fused("", 1));
      auto three = run_with_grads(in.q, in.k, in.v, dout, fused("", 3));
      INFO(c10::toString(dtype) << " B=" << B << " H=" << H);
      CHECK(torch::equal(one.out, three.out));  // forward work items do not share sums
      CHECK(torch::equal(one.distance, three.distance));
      CHECK(torch::equal(one.dk, three.dk));
      CHECK(torch::equal(one.dv, three.dv));
      // The splits' dq sums are added in another order: fp32 rounding, then at most one bf16 step.
      if (dtype == torch::kFloat)
        check_close("dq", three.dq, one.dq, 1e-6, 1e-6);
      else
        check_close("dq", three.dq, one.dq, 1e-2, 1e-6);
    }
}

TEST_CASE("distance telemetry equals sum_j p_ij (i - j) from explicit probabilities", "[attention]") {
  torch::manual_seed(16);
  const int64_t B = 2, T = 150, H = 3, D = 32;
  for (double scale : {1.0, 3.0}) {
    auto in = make_qkv(B, T, H, D, torch::kFloat, scale);
    // Explicit probabilities in fp64, written out here rather than taken from the reference back end.
    auto q = in.q.detach().to(torch::kDouble).permute({0, 2, 1, 3});
    auto k = in.k.detach().to(torch::kDouble).permute({0, 2, 1, 3});
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(D));
    auto i = torch::arange(T, torch::kDouble).unsqueeze(1), j = torch::arange(T, torch::kDouble).unsqueeze(0);
    scores = scores.masked_fill(j > i, -std::numeric_limits<double>::infinity());
    auto p = torch::softmax(scores, -1);                              // (B, H, T, T)
    auto expected = (p * (i - j).clamp_min(0)).sum(-1);             // (B, H, T)
    INFO("score scale " << scale);
    for (auto b : {attention::Backend::Fused, attention::Backend::Reference, attention::Backend::Auto}) {
      attention::Options o;
      o.backend = b;
      o.want_distance = true;
      auto got = attention::causal_attention(in.q.detach(), in.k.detach(), in.v.detach(), o).distance;
      check_close(attention::backend_name(b), got, expected, 1e-5, 1e-4);
    }
  }
}

TEST_CASE("fused attention allocates memory linear in T, never T x T", "[attention]") {
  attention::CpuAllocationTracker::install();
  torch::manual_seed(17);
  auto peak = [](int64_t T, attention::Backend b) {
    auto in = make_qkv(1, T, 2, 64, torch::kFloat);
    auto dout = torch::randn({1, T, 2, 64}, torch::kFloat);
    auto q = in.q.detach().requires_grad_(), k = in.k.detach().requires_grad_(), v = in.v.detach().requires_grad_();
    attention::PeakAllocationScope scope;
    attention::Options o;
    o.backend = b;
    o.want_distance = b != attention::Backend::Sdpa;
    attention::causal_attention(q, k, v, o).out.backward(dout);
    return static_cast<double>(scope.extra_bytes());
  };
  const double fused_1k = peak(512, attention::Backend::Fused), fused_4k = peak(2048, attention::Backend::Fused);
  const double ref_1k = peak(512, attention::Backend::Reference), ref_4k = peak(2048, attention::Backend::Reference);
  INFO(fmt::format("fused: {:.0f} -> {:.0f} bytes; reference: {:.0f} -> {:.0f} bytes", fused_1k, fused_4k, ref_1k,
                   ref_4k));
  CHECK(fused_1k > 0);
  CHECK(fused_4k / fused_1k < 4.5);    // 4x the tokens: linear growth (plus a constant)
  CHECK(ref_4k / ref_1k > 12.0);       // the probe sees the reference's T x T matrices
  // Extra memory of the fused op, bounded by its inputs' size: outputs, grads, workspace.
  CHECK(fused_4k < 16.0 * 2048 * 2 * 64 * 4);
}

namespace {

// A sharply local head at long context: q_i = k_i = a (cos w_f i, sin w_f i)_f
// with rotary-style frequencies, so the score of key j falls off with |i - j|
// and the probability mass sits within a few tokens of the query. Its distance
// is ~1 token while i runs to T - 1.
Qkv local_head(int64_t T, int64_t D, double a, torch::ScalarType dtype) {
  auto pos = torch::arange(T, torch::kDouble).unsqueeze(1);
  auto freq = torch::pow(10000.0, -torch::arange(D / 2, torch::kDouble) / static_cast<double>(D / 2)).unsqueeze(0);
  auto x = torch::cat({torch::cos(pos * freq), torch::sin(pos * freq)}, 1) * a;  // (T, D)
  Qkv r;
  auto v = torch::randn({T, D}, torch::kDouble);
  r.qkv = torch::stack({x, x, v}, 1).reshape({1, T, 3, 1, D}).to(dtype);
  r.q = r.qkv.select(2, 0);
  r.k = r.qkv.select(2, 1);
  r.v = r.qkv.select(2, 2);
  return r;
}

// sum_j p_ij (i - j) in fp64 from the inputs' exact values, a block of rows at a time.
torch::Tensor distance_fp64(const Qkv& in) {
  const int64_t T = in.q.size(1), D = in.q.size(3);
  auto q = in.q.to(torch::kDouble).reshape({T, D}), k = in.k.to(torch::kDouble).reshape({T, D});
  auto out = torch::empty({T}, torch::kDouble);
  auto j = torch::arange(T, torch::kDouble).unsqueeze(0);
  for (int64_t i0 = 0; i0 < T; i0 += 512) {
    const int64_t n = std::min<int64_t>(512, T - i0);
    auto i = torch::arange(i0, i0 + n, torch::kDouble).unsqueeze(1);
    auto s = torch::matmul(q.narrow(0, i0, n), k.t()) / std::sqrt(static_cast<double>(D));
    auto p = torch::softmax(s.masked_fill(j > i, -std::numeric_limits<double>::infinity()), -1);
    out.narrow(0, i0, n).copy_((p * (i - j).clamp_min(0)).sum(-1));
  }
  return out;
}

// What i - sum_j p_ij j / l gives in fp32 on the same probabilities (summed in
// order, each term rounded once): the cancellation the kernels used to have.
double old_formula_worst_error(const Qkv& in, const torch::Tensor& truth) {
  const int64_t T = in.q.size(1), D = in.q.size(3);
  auto q = in.q.to(torch::kDouble).reshape({T, D}), k = in.k.to(torch::kDouble).reshape({T, D});
  double worst = 0;
  for (int64_t i = T - 512; i < T; ++i) {
    auto s = torch::matmul(k.narrow(0, 0, i + 1), q[i]) / std::sqrt(static_cast<double>(D));
    auto p = torch::softmax(s, 0).to(torch::kFloat);
    const float* pp = p.data_ptr<float>();
    float sum_pj = 0.0f;
    for (int64_t j = 0; j <= i; ++j) sum_pj += pp[j] * static_cast<float>(j);
    const float old = static_cast<float>(i) - sum_pj;
    worst = std::max(worst, std::abs(static_cast<double>(old) - truth[i].item<double>()));
  }
  return worst;
}

}  // namespace

TEST_CASE("distance stays precise for a sharply local head at long context", "[attention]") {
  // Accumulating sum_j p_ij (i - j) keeps fp32's relative precision on a
  // distance of ~1 token; i - sum_j p_ij j / l subtracts two numbers near i
  // (~4000) and keeps only its absolute precision there.
  const int64_t T = 4096, D = 32;
  const double bound = 1e-4;  // tokens
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const auto in = local_head(T, D, 2.75, dtype);
    const auto truth = distance_fp64(in);
    INFO(c10::toString(dtype) << ": mean distance " << truth.mean().item<double>() << " tokens, max "
                              << truth.max().item<double>());
    REQUIRE(truth.narrow(0, T / 2, T / 2).max().item<double>() < 4.0);  // the head is local
    if (dtype == torch::kFloat) {
      // The bound is tight enough to catch the old formula's cancellation.
      const double old = old_formula_worst_error(in, truth);
      INFO("old formula in fp32: worst error " << old << " tokens");
      CHECK(old > bound);
    }
    for (const auto& path : runnable_code_paths()) {
      torch::NoGradGuard no_grad;
      auto got = fused(path, 0, true)(in.q, in.k, in.v).distance.reshape({T}).to(torch::kDouble);
      const double worst = (got - truth).abs().max().item<double>();
      INFO(path << ": worst distance error " << worst << " tokens");
      CHECK(worst <= bound);
    }
  }
}
