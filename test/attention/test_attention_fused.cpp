// The fused CPU kernel beyond the shape grid: every compiled instruction set,
// odd shapes and strides, thread counts, distance telemetry from explicit
// probabilities, and memory that grows with T (never T x T).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "attention/attention_testing.h"
#include "prism/attention/allocation_tracker.h"
#include "prism/attention/attention.h"
#include "prism/attention/fused.h"

using namespace prism;
using namespace prism::test;
namespace kc = prism::kernels::cpu;

namespace {

Attend fused(kc::Isa isa = kc::best_isa(), int threads = 0, bool distance = true) {
  return [=](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
    attention::FusedOptions o;
    o.want_distance = distance;
    o.isa = isa;
    o.num_threads = threads;
    return attention::fused_attention(q, k, v, o);
  };
}

void check_against_truth(const std::string& where, const Qkv& in, const torch::Tensor& dout, const Attend& attend) {
  auto truth = reference_fp64(in.q, in.k, in.v, dout);
  auto got = run_with_grads(in.q, in.k, in.v, dout, attend);
  const bool bf16 = in.q.scalar_type() == torch::kBFloat16;
  auto check = bf16 ? check_bf16 : check_fp32;
  check(where + ": output", got.out, truth.out);
  check(where + ": dq", got.dq, truth.dq);
  check(where + ": dk", got.dk, truth.dk);
  check(where + ": dv", got.dv, truth.dv);
  if (got.distance.defined())
    check_close(where + ": distance", got.distance, truth.distance, bf16 ? 2e-2 : 1e-5, bf16 ? 2e-2 : 1e-4);
}

}  // namespace

TEST_CASE("every instruction set this CPU has gives the same fused attention", "[attention]") {
  torch::manual_seed(11);
  for (kc::Isa isa : {kc::Isa::Scalar, kc::Isa::Avx512, kc::Isa::Avx512Bf16}) {
    if (!kc::isa_supported(isa)) {
      WARN(fmt::format("{} not supported by this CPU: not tested here", kc::isa_name(isa)));
      continue;
    }
    for (auto dtype : {torch::kFloat, torch::kBFloat16})
      for (int64_t T : {7, 65, 130})
        for (int64_t D : {24, 64, 96}) {
          auto in = make_qkv(2, T, 2, D, dtype);
          auto dout = torch::randn({2, T, 2, D}, torch::kDouble).to(dtype);
          check_against_truth(fmt::format("{} {} T={} D={}", kc::isa_name(isa), c10::toString(dtype), T, D), in, dout,
                              fused(isa));
        }
  }
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
      auto one = run_with_grads(in.q, in.k, in.v, dout, fused(kc::best_isa(), 1));
      auto three = run_with_grads(in.q, in.k, in.v, dout, fused(kc::best_isa(), 3));
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
