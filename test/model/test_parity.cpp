// The C++ model against the PyTorch reference (test/reference/gpt_reference.py)
// with the same weights: logits, loss and every parameter gradient, fp32. Rotary
// models against the reference running Hugging Face Llama's rotary code, on every
// CPU attention back end.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "prism/model/gpt.h"
#include "prism/store/safetensors.h"
#include "support.h"

using namespace prism;

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

void check_parity(const ModelConfig& cfg, const HeadSchedule& schedule, uint64_t seed,
                  attention::Backend backend = attention::Backend::Auto) {
  torch::manual_seed(seed);
  GPT model(cfg, schedule, backend);
  // Perturb LayerNorm and bias parameters so their gradients and use are tested
  // with non-trivial values (GPT-2 init sets them to 1 and 0).
  {
    torch::NoGradGuard ng;
    for (auto& p : model->named_parameters())
      if (p.key().find("ln_") != std::string::npos || p.key().find("bias") != std::string::npos)
        p.value().add_(torch::randn_like(p.value()) * 0.1);
  }
  const int64_t B = 3, T = cfg.block_size;
  auto idx = torch::randint(0, cfg.vocab_size, {B, T}, torch::kLong);
  auto targets = torch::randint(0, cfg.vocab_size, {B, T}, torch::kLong);
  targets.index_put_({0, 3}, -1);  // an ignored position

  test::TempDir dir("prism-parity");
  NamedTensors in;
  for (const auto& p : model->named_parameters()) in.emplace_back(p.key(), p.value());
  in.emplace_back("idx", idx);
  in.emplace_back("targets", targets);
  std::vector<std::string> heads;
  for (int h : schedule.heads()) heads.push_back(std::to_string(h));
  save_safetensors(dir.file("in.safetensors"), in,
                   {{"heads", fmt::format("{}", fmt::join(heads, ","))}, {"bias", cfg.bias ? "1" : "0"},
                    {"position", positions_name(cfg.position)}, {"rope_theta", fmt::format("{}", cfg.rope_theta)}});

  auto ref_run = test::run_reference("gpt_reference.py", dir.file("in.safetensors") + " " + dir.file("out.safetensors"));
  INFO(ref_run.output);
  REQUIRE(ref_run.exit_code == 0);
  auto ref = load_safetensors(dir.file("out.safetensors"));

  auto out = model->forward(idx, targets);
  out.loss.backward();
  CHECK(max_abs_diff(model->forward(idx).logits, ref.at("logits")) < 1e-5);
  CHECK(std::abs(out.loss.item<double>() - ref.at("loss").item<double>()) < 1e-5);
  int checked = 0;
  for (const auto& p : model->named_parameters()) {
    INFO("gradient of " << p.key());
    const auto& g = ref.at("grad." + p.key());
    REQUIRE(p.value().grad().defined());
    // Absolute 1e-5 plus a relative term for large gradient entries.
    double tol = 1e-5 * std::max(1.0, g.abs().max().item<double>());
    CHECK(max_abs_diff(p.value().grad(), g) < tol);
    ++checked;
  }
  CHECK(checked == static_cast<int>(model->parameters().size()));
}

ModelConfig parity_shape(bool bias, Positions position = Positions::Learned) {
  ModelConfig c;
  c.n_layer = 4;
  c.d_model = 64;
  c.n_head = 4;
  c.block_size = 24;
  c.vocab_size = 101;
  c.bias = bias;
  c.position = position;
  return c;
}

}  // namespace

TEST_CASE("parity with the PyTorch reference: uniform schedule", "[model][parity]") {
  check_parity(parity_shape(true), HeadSchedule::uniform(4, 4), 11);
}

TEST_CASE("parity with the PyTorch reference: Prism schedule", "[model][parity]") {
  check_parity(parity_shape(true), HeadSchedule::parse("1,2,4,4"), 12);
}

TEST_CASE("parity with the PyTorch reference: Prism schedule without bias", "[model][parity]") {
  check_parity(parity_shape(false), HeadSchedule::parse("2x2,4x2"), 13);
}

TEST_CASE("parity with the PyTorch reference: rotary positions, uniform schedule", "[model][parity][rope]") {
  check_parity(parity_shape(true, Positions::Rope), HeadSchedule::uniform(4, 4), 14);
}

// Head widths 64, 32, 16, 16: each layer rotates at its own width (32, 16 and 8 frequency pairs).
TEST_CASE("parity with the PyTorch reference: rotary positions, Prism schedule, on every CPU back end",
          "[model][parity][rope]") {
  ModelConfig cfg = parity_shape(false, Positions::Rope);
  cfg.rope_theta = 500.0;  // a small base: the slow pairs turn visibly within 24 positions
  const auto backend = GENERATE(attention::Backend::Reference, attention::Backend::Sdpa, attention::Backend::Fused);
  INFO("attention back end " << attention::backend_name(backend));
  check_parity(cfg, HeadSchedule::parse("1,2,4,4"), 15, backend);
}
