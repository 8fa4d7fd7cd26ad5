// The op profile of `prism bench train --profile-summary` (train/op_profile.h).
#include <catch2/catch.hpp>

#include "prism/model/gpt.h"
#include "prism/train/execution.h"
#include "prism/train/op_profile.h"
#include "prism/train/optimizer.h"
#include "prism/train/step.h"

using namespace prism;

TEST_CASE("op profile: categories by kind of work, then by name, then by scope", "[train][profile]") {
  // Matmuls, casts and fills count as themselves wherever they run.
  CHECK(op_category("aten::mm", "loss") == "matmul");
  CHECK(op_category("aten::addmm", "") == "matmul");
  CHECK(op_category("aten::_to_copy", "optimizer") == "casts/copies");
  CHECK(op_category("autograd::engine::evaluate_function: ToCopyBackward0", "") == "casts/copies");
  CHECK(op_category("aten::fill_", "attention") == "zero/fill");
  // Named ops and autograd nodes count for what they are.
  CHECK(op_category("aten::native_layer_norm_backward", "") == "norms/activations");
  CHECK(op_category("autograd::engine::evaluate_function: GeluBackward0", "") == "norms/activations");
  CHECK(op_category("aten::embedding_dense_backward", "") == "embedding");
  CHECK(op_category("aten::_fused_adamw_", "") == "optimizer");
  CHECK(op_category("prism::attention", "") == "attention");
  // Other elementwise ops count for their scope.
  CHECK(op_category("aten::exp_", "loss") == "loss");
  CHECK(op_category("aten::linalg_vector_norm", "optimizer") == "optimizer");
  CHECK(op_category("aten::sub", "") == "other");
  CHECK(op_scope("autograd::engine::evaluate_function: torch::autograd::CppNode<LmHeadCrossEntropy>") == "loss");
  CHECK(op_scope("aten::mul") == "");
  // Rotary positions (ops/rope.h): the kernel's forward record and its autograd node.
  CHECK(op_category("prism::rope", "") == "positions");
  CHECK(op_scope("autograd::engine::evaluate_function: torch::autograd::CppNode<prism::(anonymous namespace)::RotaryPositions>") ==
        "positions");
}

TEST_CASE("op profile: a training step's time is found in its categories", "[train][profile]") {
  torch::manual_seed(0);
  const ModelConfig mc = model_preset("test-tiny");
  GPT model(mc, HeadSchedule::uniform(mc.n_layer, mc.n_head));
  TrainConfig tc;
  tc.dtype = "fp32";
  tc.threads = 1;
  const Execution exec = resolve_execution(tc);
  auto opt = make_adamw(*model, tc);
  BatchSource next = [&] {
    auto x = torch::randint(0, mc.vocab_size, {2, mc.block_size}, torch::kLong);
    return std::make_pair(x, x.roll(1, 1));
  };
  optimizer_step(model, *opt, exec, next, 1, 1.0);  // warm
  OpProfiler profiler;
  for (int i = 0; i < 2; ++i) optimizer_step(model, *opt, exec, next, 1, 1.0);
  OpProfileResult r = profiler.stop();
  r.steps = 2;
  const auto c = r.by_category();
  for (const char* expected : {"matmul", "loss", "optimizer", "norms/activations", "attention", "embedding"}) {
    INFO(expected);
    CHECK(c.count(expected) == 1);
    if (c.count(expected)) CHECK(c.at(expected) > 0);
  }
  // Self times never count a nested op twice: together they fit in the wall time.
  CHECK(r.tracked_s() > 0);
  CHECK(r.tracked_s() <= r.wall_s * 1.001);
  // Two steps of 1 AdamW call per parameter group (two groups).
  CHECK(r.ops.at({"aten::_fused_adamw_", "optimizer"}).calls == 4);
  const std::string table = r.format("test", 5);
  CHECK(table.find("matmul") != std::string::npos);
  CHECK(table.find("untracked (between ops)") != std::string::npos);
  CHECK(table.find("top 5 operations by self time") != std::string::npos);
  // A second profiler while one runs is refused; after stop(), no hooks remain.
  OpProfiler again;
  CHECK_THROWS_WITH(OpProfiler(), Catch::Contains("already running"));
  CHECK(again.stop().wall_s >= 0);
}
