// Every attention back end against the fp64 reference: outputs, gradients of
// q, k, v and distance telemetry, over sequence lengths {1, 7, 64, 1000, 1024}
// and head dims {32, 64, 96, 128, 256, 512}, in fp32 and bf16.
//
// The ground truth is the reference back end run in fp64 on the same input
// values (bf16 inputs are compared with the truth of their exact values); the
// fp32 reference is itself held to the fp32 bound against it.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <map>
#include <vector>

#include "ops/attention_testing.h"
#include "prism/ops/attention.h"
#include "prism/ops/attention_fused.h"

using namespace prism;
using namespace prism::test;

namespace {

const std::vector<int64_t> kSeqLens = {1, 7, 64, 1000, 1024};
const std::vector<int64_t> kHeadDims = {32, 64, 96, 128, 256, 512};

// Batch x heads per shape: some of each for short sequences, few for long
// ones so the fp64 truth stays cheap on two cores.
std::pair<int64_t, int64_t> batch_heads(int64_t T, int64_t D) {
  if (T <= 64) return {2, 3};
  return D >= 256 ? std::pair<int64_t, int64_t>{1, 1} : std::pair<int64_t, int64_t>{1, 2};
}

struct Candidate {
  std::string name;
  bool has_distance;
  Attend attend;
};

struct Case {
  int64_t B, T, H, D;
  Qkv in;
  torch::Tensor dout;
  AttentionResult truth;
};

// The grid's inputs and fp64 truth, made once per dtype and shared by the
// test cases (the truth is most of the cost).
const std::vector<Case>& grid(torch::ScalarType dtype) {
  static std::map<torch::ScalarType, std::vector<Case>> cache;
  auto& cases = cache[dtype];
  if (!cases.empty()) return cases;
  torch::manual_seed(7);
  for (int64_t T : kSeqLens) {
    for (int64_t D : kHeadDims) {
      auto [B, H] = batch_heads(T, D);
      Case c{B, T, H, D, make_qkv(B, T, H, D, dtype), {}, {}};
      c.dout = torch::randn({B, T, H, D}, torch::kDouble).to(dtype);
      c.truth = reference_fp64(c.in.q, c.in.k, c.in.v, c.dout);
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// Runs each candidate over the whole shape grid in one dtype and checks it
// against the fp64 truth.
void check_grid(torch::ScalarType dtype, const std::vector<Candidate>& candidates) {
  const bool bf16 = dtype == torch::kBFloat16;
  for (const auto& g : grid(dtype)) {
    {
      const int64_t B = g.B, T = g.T, H = g.H, D = g.D;
      const auto& in = g.in;
      const auto& truth = g.truth;
      const auto& dout = g.dout;
      for (const auto& c : candidates) {
        const std::string where = fmt::format("{} {} B={} T={} H={} D={}", c.name, bf16 ? "bf16" : "fp32", B, T, H, D);
        auto got = run_with_grads(in.q, in.k, in.v, dout, c.attend);
        CHECK(got.out.scalar_type() == dtype);
        auto check = bf16 ? check_bf16 : check_fp32;
        check(where + ": output", got.out, truth.out);
        check(where + ": dq", got.dq, truth.dq);
        check(where + ": dk", got.dk, truth.dk);
        check(where + ": dv", got.dv, truth.dv);
        if (c.has_distance) {
          INFO(where);
          REQUIRE(got.distance.defined());
          CHECK(got.distance.scalar_type() == torch::kFloat);
          CHECK(got.distance.sizes() == torch::IntArrayRef({B, H, T}));
          // Distance is in tokens, up to T - 1: fp32 (or bf16-input) rounding scales with it.
          if (bf16)
            check_close(where + ": distance", got.distance, truth.distance, 2e-2, 2e-2);
          else
            check_close(where + ": distance", got.distance, truth.distance, 1e-5, 1e-4);
        }
      }
    }
  }
}

attention::Options with(attention::Backend b, bool distance) {
  attention::Options o;
  o.backend = b;
  o.want_distance = distance;
  return o;
}

std::vector<Candidate> through_entry_point(attention::Backend b, bool can_report_distance) {
  std::vector<Candidate> c;
  c.push_back({attention::backend_name(b), false, [b](auto& q, auto& k, auto& v) {
                 return attention::causal_attention(q, k, v, with(b, false));
               }});
  if (can_report_distance)
    c.push_back({attention::backend_name(b) + " + distance", true, [b](auto& q, auto& k, auto& v) {
                   return attention::causal_attention(q, k, v, with(b, true));
                 }});
  return c;
}

}  // namespace

TEST_CASE("fused attention matches the fp64 reference in fp32", "[attention]") {
  check_grid(torch::kFloat, through_entry_point(attention::Backend::Fused, true));
}

TEST_CASE("fused attention matches the fp64 reference in bf16", "[attention]") {
  check_grid(torch::kBFloat16, through_entry_point(attention::Backend::Fused, true));
}

TEST_CASE("sdpa attention matches the fp64 reference in fp32", "[attention]") {
  check_grid(torch::kFloat, through_entry_point(attention::Backend::Sdpa, false));
}

TEST_CASE("sdpa attention matches the fp64 reference in bf16", "[attention]") {
  check_grid(torch::kBFloat16, through_entry_point(attention::Backend::Sdpa, false));
}

TEST_CASE("reference attention in fp32 and bf16 matches its fp64 self", "[attention]") {
  check_grid(torch::kFloat, through_entry_point(attention::Backend::Reference, true));
  check_grid(torch::kBFloat16, through_entry_point(attention::Backend::Reference, true));
}
