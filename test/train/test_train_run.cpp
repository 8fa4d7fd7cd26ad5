// prism train end to end: a real run on synthetic shards, kill -9 + --resume,
// and the bad inputs of issue 3. Reads run.h5 back through h5py.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <csignal>
#include <filesystem>

#include "support.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

std::string config_text(const std::string& data_dir) {
  return fmt::format(
      "model: {{preset: test-tiny, vocab_size: 50257}}\n"
      "schedule: {{heads: [2, 4]}}\n"
      "train: {{batch_size: 4, seq_len: 32, max_steps: 12, lr: 3.0e-3, warmup_steps: 2, eval_every: 4,\n"
      "        eval_tokens: 512, distance_every: 4, distance_batch: 2, checkpoint_every: 4, log_every: 2,\n"
      "        threads: 1, dtype: fp32}}\n"
      "data: {{dir: {}}}\n",
      data_dir);
}

struct Fixture {
  TempDir dir{"prism-train"};
  std::string shards = dir.file("shards");
  std::string config = dir.file("run.yaml");
  explicit Fixture(const std::string& make_args = "") {
    auto r = run_reference("make_shards.py", shards + " " + make_args);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    write_file(config, config_text(shards));
  }
};

nlohmann::json read_run(const std::string& h5) {
  auto r = run_reference("read_run.py", h5);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

}  // namespace

TEST_CASE("prism train runs to a falling loss and a complete run.h5", "[train][run]") {
  Fixture f;
  auto r = run_prism(fmt::format("train {} --out {}", f.config, f.dir.file("a")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("step     12/12") && Catch::Contains("tok/s"));
  CHECK_THAT(r.output, Catch::Contains("ETA") && Catch::Contains("completed: 12 steps"));
  auto run = read_run(f.dir.file("a/run.h5"));
  CHECK(run["attrs"]["status"] == "completed");
  CHECK(run["attrs"]["heads"] == std::vector<int>{2, 4});
  CHECK(run["attrs"]["seed"] == 0);
  CHECK_THAT(run["attrs"]["config"].get<std::string>(), Catch::Contains("test-tiny"));
  auto loss = run["datasets"]["train/loss"].get<std::vector<double>>();
  REQUIRE(loss.size() == 12);
  CHECK(run["datasets"]["train/step"].get<std::vector<int64_t>>().back() == 12);
  CHECK(run["datasets"]["train/tokens"].get<std::vector<int64_t>>().back() == 12 * 4 * 32);
  CHECK(loss.back() < loss.front() - 1.0);  // clearly falling
  CHECK(run["datasets"]["val/step"].get<std::vector<int64_t>>() == std::vector<int64_t>{0, 4, 8, 12});
  auto val = run["datasets"]["val/loss"].get<std::vector<double>>();
  CHECK(val.back() < val.front());
  CHECK(run["datasets"]["attention/step"].get<std::vector<int64_t>>() == std::vector<int64_t>{0, 4, 8, 12});
  auto D = run["datasets"]["attention/distance"].get<std::vector<std::vector<double>>>();
  REQUIRE(D.size() == 4);
  CHECK(D[0].size() == 2);  // one D_l per layer
  CHECK(run["datasets"]["attention/layer_00/distance"][0].size() == 2);  // 2 heads in layer 0
  CHECK(run["datasets"]["attention/layer_01/distance"][0].size() == 4);
  CHECK(fs::exists(f.dir.file("a/checkpoints/step_000012/model.safetensors")));
  CHECK(fs::exists(f.dir.file("a/config.yaml")));
}

TEST_CASE("every validation loss carries its standard error over batches, and run.h5 the data's unigram baseline",
          "[train][run]") {
  // 512 validation tokens = 4 batches of 4 x 32: /val/loss_se is the sample sd of
  // the 4 per-batch mean losses / 2, recomputed in PyTorch from the last checkpoint.
  Fixture f;
  auto r = run_prism(fmt::format("train {} --out {}", f.config, f.dir.file("a")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto run = read_run(f.dir.file("a/run.h5"));
  const auto loss = run["datasets"]["val/loss"].get<std::vector<double>>();
  const auto se = run["datasets"]["val/loss_se"].get<std::vector<double>>();
  REQUIRE(se.size() == loss.size());
  for (double s : se) CHECK(s > 0);
  auto ref = run_reference("val_loss_reference.py",
                           fmt::format("{} {}/synth_val_000000.bin --batch 4 --seq 32 --batches 4",
                                       f.dir.file("a/checkpoints/step_000012/model.safetensors"), f.shards));
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  auto j = nlohmann::json::parse(ref.output);
  CHECK(loss.back() == Approx(j["mean"].get<double>()).margin(1e-4));
  CHECK(se.back() == Approx(j["se"].get<double>()).epsilon(1e-3));
  CHECK_THAT(r.output, Catch::Contains(fmt::format("val loss {:.4f} ± {:.4f}", loss.back(), se.back())));
  // The loss by query position at the end (train/position_loss.h): each batch's bucket
  // means against PyTorch's per-token cross-entropy, and their mean is the val loss.
  const auto edges = j["edges"].get<std::vector<int64_t>>();
  REQUIRE(edges == std::vector<int64_t>{0, 1, 2, 4, 8, 16, 32});
  auto lo = run["datasets"]["val/by_position/T32/bucket_lo"].get<std::vector<int64_t>>();
  auto hi = run["datasets"]["val/by_position/T32/bucket_hi"].get<std::vector<int64_t>>();
  CHECK(lo == std::vector<int64_t>(edges.begin(), edges.end() - 1));
  CHECK(hi == std::vector<int64_t>(edges.begin() + 1, edges.end()));
  auto by_batch = run["datasets"]["val/by_position/T32/loss_by_batch"].get<std::vector<std::vector<double>>>();
  auto want = j["by_position"].get<std::vector<std::vector<double>>>();
  REQUIRE(by_batch.size() == 4);
  for (size_t b = 0; b < 4; ++b)
    for (size_t k = 0; k < 6; ++k) CHECK(by_batch[b][k] == Approx(want[b][k]).margin(1e-4));
  double overall = 0;
  for (size_t b = 0; b < 4; ++b)
    for (size_t k = 0; k < 6; ++k) overall += by_batch[b][k] * static_cast<double>(hi[k] - lo[k]) / (32.0 * 4);
  CHECK(overall == Approx(loss.back()).margin(1e-5));
  CHECK_THAT(r.output, Catch::Contains("val loss by position: 0 ") && Catch::Contains("-> run.h5:/val/by_position/T32"));
  // Synthetic shards have no prepare.json: the baseline is unknown, stored as NaN.
  CHECK(run["attrs"]["unigram_val_loss"].is_null());  // NaN, which read_run.py writes as null
}

TEST_CASE("the configured back end trains, and distance passes on one without distance output use auto", "[train][run]") {
  // attention.backend: sdpa trains on SDPA, which reports no distance: the trainer's
  // distance passes (forward options, not a swapped model setting) run on auto, and
  // training is untouched by them: the same curves as a run on the reference back end.
  Fixture f;
  for (const char* backend : {"sdpa", "reference"}) {
    auto r = run_prism(fmt::format("train {} --out {} attention.backend={}", f.config, f.dir.file(backend), backend));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains(fmt::format("attention {} |", backend)));
  }
  auto sdpa = read_run(f.dir.file("sdpa/run.h5"))["datasets"];
  auto ref = read_run(f.dir.file("reference/run.h5"))["datasets"];
  const auto loss_s = sdpa["train/loss"].get<std::vector<double>>(), loss_r = ref["train/loss"].get<std::vector<double>>();
  REQUIRE(loss_s.size() == 12);
  REQUIRE(loss_r.size() == 12);
  for (size_t i = 0; i < loss_s.size(); ++i) CHECK(loss_s[i] == Approx(loss_r[i]).margin(1e-3));
  const auto d_s = sdpa["attention/distance"].get<std::vector<std::vector<double>>>();
  const auto d_r = ref["attention/distance"].get<std::vector<std::vector<double>>>();
  REQUIRE(d_s.size() == 4);
  REQUIRE(d_r.size() == 4);
  CHECK(d_s[0][1] > 0.0);
  for (size_t k = 0; k < d_s.size(); ++k)
    for (size_t l = 0; l < 2; ++l) CHECK(d_s[k][l] == Approx(d_r[k][l]).margin(0.05));
}

TEST_CASE("kill -9 mid-run, then --resume, reproduces the uninterrupted loss curve exactly", "[train][run][resume]") {
  // Both dtypes: bf16 autocast's state (and its fp32 master weights) must resume exactly too.
  const std::string dtype = GENERATE(as<std::string>(), "fp32", "bf16");
  INFO("train.dtype=" << dtype);
  const std::string dtype_override = "train.dtype=" + dtype;
  Fixture f;
  // With dropout on, the RNG state must be restored too.
  auto a = run_prism(fmt::format("train {} --out {} model.dropout=0.1 {}", f.config, f.dir.file("a"), dtype_override));
  REQUIRE(a.exit_code == 0);

  // Start the same run in the background; kill -9 once a mid-run checkpoint exists.
  const std::string b = f.dir.file("b");
  const Killed killed =
      run_prism_killed_at_checkpoint({"train", f.config, "--out", b, "model.dropout=0.1", dtype_override}, b, 4);
  REQUIRE(killed.saw_checkpoint);
  REQUIRE(killed.by_signal);
  auto mid = read_run(b + "/run.h5");  // the killed run's file opens
  CHECK(mid["attrs"]["status"] == "running");

  auto r = run_prism("train --resume " + b);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("resumed"));
  auto ra = read_run(f.dir.file("a/run.h5")), rb = read_run(b + "/run.h5");
  CHECK(rb["attrs"]["status"] == "completed");
  for (const char* key : {"train/step", "train/loss", "train/grad_norm", "train/lr", "val/step", "val/loss",
                          "attention/step", "attention/distance"}) {
    INFO(key);
    CHECK(ra["datasets"][key] == rb["datasets"][key]);  // bit-equal
  }
}

namespace {
// A model.safetensors's tensor data: everything after the 8-byte header length and
// the JSON header (whose metadata names the run, step and schedule). Read as bytes:
// prism/store/safetensors.h would bring LibTorch into this file's compile.
std::string tensor_bytes(const std::string& model_safetensors) {
  const std::string s = read_file(model_safetensors);
  REQUIRE(s.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(s[static_cast<size_t>(i)]);
  REQUIRE(s.size() >= 8 + n);
  return s.substr(8 + n);
}
}  // namespace

TEST_CASE("SIGUSR1 (a cluster's warning) stops a run at a checkpoint and --resume gives the same curve bit for bit",
          "[train][run][resume]") {
  Fixture f;
  const std::vector<std::string> longer{"train.max_steps=300", "train.eval_every=50", "train.distance_every=50"};
  auto a = run_prism(fmt::format("train {} --out {} {}", f.config, f.dir.file("a"), fmt::join(longer, " ")));
  REQUIRE(a.exit_code == 0);
  const std::string b = f.dir.file("b");
  std::vector<std::string> args{"train", f.config, "--out", b};
  args.insert(args.end(), longer.begin(), longer.end());
  const Killed warned = run_prism_killed_at_checkpoint(args, b, 4, SIGUSR1);
  REQUIRE(warned.saw_checkpoint);
  CHECK_FALSE(warned.by_signal);  // handled: it finished its step, wrote a checkpoint and exited
  CHECK(warned.exit_code == 130);
  auto mid = read_run(b + "/run.h5");
  CHECK(mid["attrs"]["status"] == "running");  // an interrupted run stays "running" until resumed
  const std::string latest = read_file(b + "/checkpoints/latest");
  CHECK(latest.find("step_000004") == std::string::npos);  // the stop wrote its own checkpoint after step 4
  auto r = run_prism("train --resume " + b);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto ra = read_run(f.dir.file("a/run.h5")), rb = read_run(b + "/run.h5");
  for (const char* key : {"train/step", "train/loss", "train/grad_norm", "train/lr", "val/step", "val/loss"}) {
    INFO(key);
    CHECK(ra["datasets"][key] == rb["datasets"][key]);  // bit-equal
  }
}

TEST_CASE("train.checkpoint_minutes checkpoints by the clock as well as by steps", "[train][run]") {
  Fixture f;
  const std::string by_steps = f.dir.file("steps"), by_clock = f.dir.file("clock");
  auto r = run_prism(fmt::format("train {} --out {} train.checkpoint_every=0", f.config, by_steps));
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(fs::exists(by_steps + "/checkpoints/step_000011"));  // only the end's
  r = run_prism(fmt::format("train {} --out {} train.checkpoint_every=0 train.checkpoint_minutes=1e-7", f.config, by_clock));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(by_clock + "/checkpoints/step_000011"));  // every step is past 6 microseconds: the last two kept
  CHECK(fs::exists(by_clock + "/checkpoints/step_000012"));
  CHECK_THAT(read_file(by_clock + "/config.yaml"), Catch::Contains("checkpoint_minutes: "));
  CHECK_THAT(read_file(by_steps + "/config.yaml"), !Catch::Contains("checkpoint_minutes"));
}

TEST_CASE("train.init_from starts a run from another run's weights, under another schedule", "[train][run]") {
  Fixture f;
  const std::string a = f.dir.file("a"), b = f.dir.file("b");
  auto ra = run_prism(fmt::format("train {} --out {} train.max_steps=4", f.config, a));
  INFO(ra.output);
  REQUIRE(ra.exit_code == 0);
  // At lr 0 a step leaves the weights as they started: b's final weights are a's.
  auto rb = run_prism(fmt::format("train {} --out {} train.init_from={} \"schedule.heads=[1, 4]\" train.lr=0 "
                                  "train.max_steps=1 train.checkpoint_every=0",
                                  f.config, b, a));
  INFO(rb.output);
  REQUIRE(rb.exit_code == 0);
  CHECK_THAT(rb.output, Catch::Contains("weights: from " + a + "/checkpoints/step_000004/model.safetensors"));
  CHECK(tensor_bytes(b + "/checkpoints/step_000001/model.safetensors") ==
        tensor_bytes(a + "/checkpoints/step_000004/model.safetensors"));
  CHECK_THAT(read_file(b + "/config.yaml"), Catch::Contains("init_from: " + a));
  // What it cannot load, it names.
  auto none = run_prism(fmt::format("train {} --out {} train.init_from={}", f.config, f.dir.file("c"), f.dir.file("nowhere")));
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Catch::Contains("no checkpoint found") && Catch::Contains(f.dir.file("nowhere")));
  auto wider = run_prism(fmt::format("train {} --out {} train.init_from={} model.d_model=128", f.config, f.dir.file("d"), a));
  CHECK(wider.exit_code == 2);
  CHECK_THAT(wider.output, Catch::Contains("in the checkpoint but") && Catch::Contains("Fix:"));
}

TEST_CASE("a finished run is never overwritten without --force", "[train][run]") {
  Fixture f;
  const std::string out = f.dir.file("a");
  REQUIRE(run_prism(fmt::format("train {} --out {} train.max_steps=2", f.config, out)).exit_code == 0);
  auto before = read_file(out + "/run.h5");
  auto again = run_prism(fmt::format("train {} --out {} train.max_steps=2", f.config, out));
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.output, Catch::Contains("already exists") && Catch::Contains("--force"));
  CHECK(read_file(out + "/run.h5") == before);
  CHECK(run_prism(fmt::format("train {} --out {} --force train.max_steps=2", f.config, out)).exit_code == 0);
}

TEST_CASE("NaN loss stops the run with a clear message and keeps the last good checkpoint", "[train][run]") {
  Fixture f;
  // An absurd learning rate without clipping diverges within a few steps.
  auto r = run_prism(fmt::format("train {} --out {} train.lr=5000 train.grad_clip=0 train.checkpoint_every=1",
                                 f.config, f.dir.file("a")));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("training diverged") && Catch::Contains("last good checkpoint"));
  auto run = read_run(f.dir.file("a/run.h5"));
  CHECK(run["attrs"]["status"] == "failed");
  auto latest = read_file(f.dir.file("a/checkpoints/latest"));
  auto steps = run["datasets"]["train/step"].get<std::vector<int64_t>>();
  REQUIRE_FALSE(steps.empty());
  CHECK_THAT(latest, Catch::Contains(fmt::format("step_{:06d}", steps.back())));
  // The kept checkpoint holds finite weights: it samples and it resumes.
  for (double l : run["datasets"]["train/loss"].get<std::vector<double>>()) CHECK(std::isfinite(l));
  auto sample = run_prism(fmt::format("sample {} --prompt x --tokens 3", f.dir.file("a")));
  INFO(sample.output);
  CHECK(sample.exit_code == 0);
}

TEST_CASE("bad input to prism train: one clear line naming the file and the fix", "[train][run]") {
  struct Case {
    std::string make_args, override_, expect;
  };
  for (const auto& c : {Case{"", "train.seq_len=64", "exceeds model.block_size"},
                        Case{"--corrupt magic", "", "magic"},
                        Case{"--corrupt truncate", "", "synth_train_000001.bin"},
                        Case{"--corrupt short", "", "synth_train_000001.bin"},
                        Case{"", "data.dir=/nonexistent/corpus", "/nonexistent/corpus"},
                        Case{"", "train.lr=fast", "train.lr"}}) {
    INFO(c.make_args << " " << c.override_);
    Fixture f(c.make_args);
    auto r = run_prism(fmt::format("train {} --out {} {}", f.config, f.dir.file("a"), c.override_));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.expect) && Catch::Contains("Fix:"));
  }
}

TEST_CASE("a full disk while checkpointing fails cleanly and keeps the previous checkpoint", "[train][run]") {
  Fixture f;
  const std::string out = f.dir.file("a");
  REQUIRE(run_prism(fmt::format("train {} --out {} train.max_steps=4", f.config, out)).exit_code == 0);
  // Continue with a file-size limit that a checkpoint cannot fit in: writes fail
  // with EFBIG like they would with ENOSPC (SIGXFSZ ignored so write() reports it).
  auto r = run(fmt::format("bash -c \"trap '' XFSZ; ulimit -f 2000; '{}' train --resume {} train.max_steps=8\"",
                           PRISM_BINARY, out));
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("model.safetensors") && Catch::Contains("Fix:"));
  CHECK_THAT(read_file(out + "/checkpoints/latest"), Catch::Contains("step_000004"));
  CHECK(fs::exists(out + "/checkpoints/step_000004/model.safetensors"));
  CHECK_FALSE(fs::exists(out + "/checkpoints/step_000008"));
}
