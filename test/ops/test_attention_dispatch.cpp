// What `auto` picks, what explicit requests refuse (with a fix), and a small
// model trained with each back end.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <vector>

#include "ops/attention_testing.h"
#include "prism/ops/attention.h"
#include "prism/ops/cpu_code_paths.h"
#include "prism/error.h"
#include "prism/model/gpt.h"
#include "error_checks.h"

using prism::test::require_error;

using namespace prism;
using attention::Backend;

namespace {

attention::Options opts(Backend b, bool distance = false, double dropout = 0.0) {
  attention::Options o;
  o.backend = b;
  o.want_distance = distance;
  o.dropout_p = dropout;
  return o;
}

torch::Tensor q_of(torch::ScalarType dtype, int64_t D = 64) { return torch::zeros({1, 8, 2, D}, dtype); }

// Runs f, expecting a prism::Error whose text mentions every fragment.

}  // namespace

TEST_CASE("auto picks the fused kernel on a measured SIMD code path for fp32 and bf16 without dropout",
          "[attention]") {
  const auto path = attention::default_cpu_code_path();
  const bool fast = path.auto_eligible;
  CHECK(fast == (path.name == "avx2" || path.name == "avx512" || path.name == "avx512_bf16"));
  if (!fast) WARN("code path " << path.name << " is not one auto trusts: auto is expected to pick SDPA / the reference");
  for (auto dtype : {torch::kFloat, torch::kBFloat16})
    for (int64_t D : {16, 64, 512, 768})
      for (bool distance : {false, true}) {
        INFO(c10::toString(dtype) << " D=" << D << " distance " << distance);
        const Backend expected = fast ? Backend::Fused : distance ? Backend::Reference : Backend::Sdpa;
        CHECK(attention::resolve_backend(opts(Backend::Auto, distance), q_of(dtype, D)) == expected);
      }
}

TEST_CASE("auto avoids the fused kernel with dropout or other dtypes", "[attention]") {
  CHECK(attention::resolve_backend(opts(Backend::Auto, false, 0.1), q_of(torch::kFloat)) == Backend::Sdpa);
  CHECK(attention::resolve_backend(opts(Backend::Auto, true, 0.1), q_of(torch::kFloat)) == Backend::Reference);
  CHECK(attention::resolve_backend(opts(Backend::Auto, false), q_of(torch::kDouble)) == Backend::Sdpa);
  CHECK(attention::resolve_backend(opts(Backend::Auto, true), q_of(torch::kDouble)) == Backend::Reference);
  CHECK(attention::supports_distance(Backend::Fused));
  CHECK(attention::supports_distance(Backend::Reference));
  CHECK_FALSE(attention::supports_distance(Backend::Sdpa));
}

TEST_CASE("explicit back ends refuse what they cannot do, with a fix", "[attention]") {
  require_error([] { attention::resolve_backend(opts(Backend::Fused, false, 0.1), q_of(torch::kFloat)); },
                {"fused", "dropout", "model.dropout: 0"});
  require_error([] { attention::resolve_backend(opts(Backend::Fused), q_of(torch::kDouble)); }, {"fused", "Double"});
  require_error([] { attention::resolve_backend(opts(Backend::Sdpa, true), q_of(torch::kFloat)); },
                {"sdpa", "distance"});
  require_error([] { attention::resolve_backend(opts(Backend::Cuda), q_of(torch::kFloat)); }, {"cuda"});
  // Through the entry point too, not just the resolver.
  auto q = torch::randn({1, 8, 2, 16});
  require_error([&] { attention::causal_attention(q, q, q, opts(Backend::Fused, false, 0.5)); }, {"dropout"});
}

TEST_CASE("dropout on attention probabilities runs through auto (SDPA) and the reference", "[attention]") {
  torch::manual_seed(3);
  auto in = test::make_qkv(2, 40, 2, 16, torch::kFloat);
  auto plain = attention::causal_attention(in.q, in.k, in.v, opts(Backend::Reference)).out;
  for (Backend b : {Backend::Auto, Backend::Reference}) {
    auto o = attention::causal_attention(in.q, in.k, in.v, opts(b, b == Backend::Reference, 0.5));
    CHECK(o.out.sizes() == plain.sizes());
    CHECK_FALSE(torch::allclose(o.out, plain));  // some probabilities were dropped
    o.out.sum().backward();
  }
  CHECK(in.qkv.grad().defined());
}

TEST_CASE("a small model trains to the same losses with every back end", "[attention]") {
  ModelConfig cfg = model_preset("test-tiny");  // 2 layers x 64, context 32, vocab 512
  const auto schedule = HeadSchedule::parse("1,4");  // head dims 64 and 16
  torch::manual_seed(21);
  auto idx = torch::randint(0, cfg.vocab_size, {4, cfg.block_size}, torch::kLong);
  auto targets = torch::randint(0, cfg.vocab_size, {4, cfg.block_size}, torch::kLong);
  auto train = [&](Backend b) {
    torch::manual_seed(22);
    GPT model(cfg, schedule, b);
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.1));
    std::vector<double> losses;
    for (int step = 0; step < 6; ++step) {
      opt.zero_grad();
      auto loss = model->forward(idx, targets).loss;
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  const auto ref = train(Backend::Reference);
  CHECK(ref.back() < ref.front() - 0.1);  // it does learn
  for (Backend b : {Backend::Sdpa, Backend::Fused, Backend::Auto}) {
    const auto got = train(b);
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO(attention::backend_name(b) << " step " << i);
      CHECK(got[i] == Approx(ref[i]).epsilon(1e-5));
    }
  }
}
