#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <filesystem>

#include "prism/error.h"
#include "prism/store/safetensors.h"
#include "prism/train/checkpoint.h"
#include "prism/train/optimizer.h"
#include "support.h"

using namespace prism;

namespace {
struct Setup {
  Config cfg;
  GPT model{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt;
  explicit Setup(uint64_t seed, bool rope = false) {
    cfg = parse_config(YAML::Load(std::string("model: {preset: test-tiny, dropout: 0.1") +
                                  (rope ? ", position: rope, rope_theta: 500" : "") + "}\nschedule: {heads: [2, 4]}\n"),
                       "test");
    torch::manual_seed(seed);
    model = GPT(cfg.model, cfg.schedule);
    opt = make_adamw(*model, cfg.train);
  }
  double step(uint64_t data_seed) {
    auto g = at::detail::createCPUGenerator(data_seed);
    auto x = torch::randint(0, 512, {2, 16}, g, torch::kLong);
    auto y = torch::randint(0, 512, {2, 16}, g, torch::kLong);
    opt->zero_grad();
    model->train();
    auto loss = model->forward(x, y).loss;  // dropout draws from the global RNG
    loss.backward();
    opt->step();
    return loss.item<double>();
  }
};
}  // namespace

TEST_CASE("checkpoint round trip continues bit-exactly (weights, AdamW moments, RNG)", "[train][checkpoint]") {
  const bool rope = GENERATE(false, true);  // learned or rotary positions
  test::TempDir dir;
  Setup a(5, rope);
  a.step(1);
  a.step(2);
  TrainerState st;
  st.step = 2;
  st.tokens = 64;
  st.loader = {7, 1, 3};
  st.best_val_loss = 4.5;
  st.best_val_step = 2;
  auto ckpt = save_checkpoint(dir.path(), a.model, *a.opt, st, to_yaml(a.cfg));
  CHECK(latest_checkpoint(dir.path()) == ckpt);
  double l3a = a.step(3), l4a = a.step(4);

  Setup b(99, rope);  // different init: everything must come from the checkpoint
  TrainerState sb;
  load_checkpoint(ckpt, b.model, *b.opt, sb);
  CHECK(sb.step == 2);
  CHECK(sb.tokens == 64);
  CHECK(sb.loader.seed == 7);
  CHECK(sb.loader.epoch == 1);
  CHECK(sb.loader.position == 3);
  CHECK(sb.best_val_loss == 4.5);
  double l3b = b.step(3), l4b = b.step(4);
  CHECK(l3a == l3b);  // exact, not approximate
  CHECK(l4a == l4b);
  auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  for (const auto& p : pa) CHECK(torch::equal(p.value(), pb[p.key()]));
}

TEST_CASE("checkpoints keep the newest two and latest names a complete one", "[train][checkpoint]") {
  test::TempDir dir;
  Setup a(1);
  a.step(1);
  TrainerState st;
  for (int s : {10, 20, 30}) {
    st.step = s;
    save_checkpoint(dir.path(), a.model, *a.opt, st, to_yaml(a.cfg));
  }
  namespace fs = std::filesystem;
  CHECK_FALSE(fs::exists(dir.path() + "/checkpoints/step_000010"));
  CHECK(fs::exists(dir.path() + "/checkpoints/step_000020/model.safetensors"));
  CHECK(*latest_checkpoint(dir.path()) == dir.path() + "/checkpoints/step_000030");
  // A partial newer checkpoint (crash mid-save) is ignored: latest still names step 30.
  fs::create_directories(dir.path() + "/checkpoints/step_000040");
  test::write_file(dir.path() + "/checkpoints/step_000040/model.safetensors", "garbage");
  CHECK(*latest_checkpoint(dir.path()) == dir.path() + "/checkpoints/step_000030");
}

TEST_CASE("load_model rebuilds the model from the checkpoint alone", "[train][checkpoint]") {
  const bool rope = GENERATE(false, true);
  test::TempDir dir;
  Setup a(3, rope);
  TrainerState st;
  st.step = 1;
  save_checkpoint(dir.path(), a.model, *a.opt, st, to_yaml(a.cfg));
  auto lm = load_model(dir.path());
  CHECK(lm.config.schedule == a.cfg.schedule);
  CHECK(lm.config.model.position == (rope ? Positions::Rope : Positions::Learned));
  CHECK(lm.config.model.rope_theta == (rope ? 500.0 : 10000.0));
  CHECK(lm.step == 1);
  auto idx = torch::randint(0, 512, {1, 8}, torch::kLong);
  a.model->eval();
  lm.model->eval();
  CHECK(torch::equal(a.model->forward(idx).logits, lm.model->forward(idx).logits));
  // A checkpoint of another schedule does not load silently.
  GPT other(a.cfg.model, HeadSchedule::uniform(2, 4));
  auto opt = make_adamw(*other, a.cfg.train);
  TrainerState s2;
  CHECK_THROWS_WITH(load_checkpoint(dir.path() + "/checkpoints/step_000001", other, *opt, s2),
                    Catch::Contains("schedule"));
  CHECK_THROWS_WITH(load_model(dir.file("nothing-here")), Catch::Contains("no checkpoint"));
}

TEST_CASE("checkpoint weights load in Python's safetensors with config and schedule metadata", "[train][checkpoint]") {
  test::TempDir dir;
  Setup a(4);
  TrainerState st;
  st.step = 3;
  auto ckpt = save_checkpoint(dir.path(), a.model, *a.opt, st, to_yaml(a.cfg));
  const double sum = a.model->named_parameters()["h.1.attn.c_attn.weight"].sum().item<double>();
  auto r = test::run_reference("load_checkpoint.py", ckpt + "/model.safetensors h.1.attn.c_attn.weight");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("heads=2,4") && Catch::Contains("step=3") && Catch::Contains("test-tiny"));
  auto pos = r.output.find("sum=");
  REQUIRE(pos != std::string::npos);
  CHECK(std::stod(r.output.substr(pos + 4)) == Approx(sum).epsilon(1e-6));
}

TEST_CASE("a corrupt or truncated safetensors file is a clear error", "[train][checkpoint]") {
  test::TempDir dir;
  save_safetensors(dir.file("ok.safetensors"), {{"a", torch::ones({4, 4})}});
  auto bytes = test::read_file(dir.file("ok.safetensors"));
  test::write_file(dir.file("cut.safetensors"), bytes.substr(0, bytes.size() - 10));
  test::write_file(dir.file("tiny.safetensors"), "abc");
  CHECK_THROWS_WITH(load_safetensors(dir.file("cut.safetensors")), Catch::Contains("cut.safetensors") && Catch::Contains("outside"));
  CHECK_THROWS_WITH(load_safetensors(dir.file("tiny.safetensors")), Catch::Contains("not a valid safetensors"));
  CHECK_THROWS_WITH(load_safetensors(dir.file("none.safetensors")), Catch::Contains("cannot open"));
  CHECK(torch::equal(load_safetensors(dir.file("ok.safetensors")).at("a"), torch::ones({4, 4})));
}
