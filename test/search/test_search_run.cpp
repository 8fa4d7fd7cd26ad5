// prism search end to end on synthetic shards: one shared model trained over a
// space of schedules, its state per step in run.h5, the ranking and top.yaml;
// exact resume after kill -9; 2 data-parallel processes equal to 1; every CPU
// attention back end; --dry-run's cost against the grid's.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "prism/search/results.h"
#include "prism/search/search.h"
#include "prism/search/space.h"
#include "prism/sweep/halving.h"
#include "prism/sweep/plan.h"
#include "support.h"
#include "train/rank_launch.h"
#include "train/run_compare.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

// A 2-layer model searching any of {1, 2, 4, 8} heads per layer (16 schedules): more than
// exact_limit, so the ranking probes per-layer scores and re-evaluates the best exactly.
std::string search_text(const std::string& data_dir, const std::string& method, int steps) {
  return fmt::format(
      "model: {{preset: test-tiny, vocab_size: 50257}}\n"
      "train: {{batch_size: 4, seq_len: 32, tokens_per_step: 256, max_steps: {}, lr: 3.0e-3, warmup_steps: 2,\n"
      "        eval_every: 4, eval_tokens: 512, distance_every: 0, distance_batch: 2, checkpoint_every: 4,\n"
      "        log_every: 2, threads: 1, dtype: fp32}}\n"
      "data: {{dir: {}}}\n"
      "search:\n"
      "  method: {}\n"
      "  space: {{heads: [1, 2, 4, 8]}}\n"
      "  mixture: {{lr: 0.05, tau: [1.0, 0.1], start: 0.0}}\n"
      "  rank: {{batches: 2, exact_limit: 4, probe_batches: 1, candidates: 3, schedules: [[4, 4], [8, 1]],\n"
      "         progress_probes: 8}}\n"
      "  top: 2\n"
      "  seeds: [0, 1]\n",
      steps, data_dir, method);
}

struct Fixture {
  TempDir dir{"prism-search"};
  std::string shards = dir.file("shards");
  Fixture() {
    auto r = run_reference("make_shards.py", shards);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  std::string file(const std::string& method, int steps = 8) {
    const std::string path = dir.file(fmt::format("search-{}-{}.yaml", method, steps));
    write_file(path, search_text(shards, method, steps));
    return path;
  }
};

// A prepared data folder with only its prepare.json (a 1000-id vocabulary): enough to plan a search.
std::string prepared_data(TempDir& dir) {
  const std::string data = dir.file("data");
  fs::create_directories(data);
  write_file(data + "/prepare.json",
             R"({"files": 1, "documents": 1, "bytes": 1, "tokens": 1, "val_tokens": 1, "train_tokens": 1, )"
             R"("seconds": 0, "shards": [], "vocab": {"file": "vocab.tiktoken", "size": 1000, "trained": true}})");
  return data;
}

std::vector<std::vector<double>> rows(const nlohmann::json& run, const std::string& key) {
  return run["datasets"][key].get<std::vector<std::vector<double>>>();
}

}  // namespace

TEST_CASE("a mixture with sampled paths runs n counts per layer drawn from p, renormalized, and only theirs learn",
          "[search][mixture]") {
  MixtureSettings st;
  st.paths = 2;
  const std::vector<int> choices{1, 2, 4, 8};
  ArchitectureWeights arch(3, choices, st, 100, torch::kCPU);
  {
    torch::NoGradGuard ng;
    arch.logits().copy_(torch::tensor({0.0, 1.0, 2.0, -1.0, 3.0, 0.0, 0.0, 0.0, -2.0, 0.5, 0.5, 1.5}).view({3, 4}));
  }
  const double tau = 0.7;
  const std::vector<double> p = arch.probabilities(tau);
  CHECK(arch.paths_run() == 2);
  // A pure function of the stream; two distinct counts per layer, ascending, weighted by p renormalized over them.
  SplitMix r1(5, 3, 1), r2(5, 3, 1);
  const ForwardOptions a = arch.sampled_mixture(tau, r1), b = arch.sampled_mixture(tau, r2);
  REQUIRE(a.heads.size() == 3);
  for (size_t l = 0; l < 3; ++l) {
    INFO("layer " << l);
    const auto& c = a.heads[l].counts;
    CHECK(c == b.heads[l].counts);
    REQUIRE(c.size() == 2);
    CHECK(c[0] < c[1]);
    const auto k0 = std::find(choices.begin(), choices.end(), c[0]) - choices.begin();
    const auto k1 = std::find(choices.begin(), choices.end(), c[1]) - choices.begin();
    REQUIRE(k1 < 4);
    const double p0 = p[4 * l + static_cast<size_t>(k0)], p1 = p[4 * l + static_cast<size_t>(k1)];
    CHECK(a.heads[l].weights[0].item<double>() == Approx(p0 / (p0 + p1)).epsilon(1e-5));
    CHECK(a.heads[l].weights[1].item<double>() == Approx(p1 / (p0 + p1)).epsilon(1e-5));
  }
  // Draws from p without replacement: count k is in the pair with probability p_k + sum_j p_j p_k / (1 - p_j).
  const int draws = 6000;
  std::vector<double> seen(12, 0.0);
  for (int d = 0; d < draws; ++d) {
    SplitMix rng(9, static_cast<uint64_t>(d), 0);
    const ForwardOptions o = arch.sampled_mixture(tau, rng);
    for (size_t l = 0; l < 3; ++l)
      for (int c : o.heads[l].counts)
        seen[4 * l + static_cast<size_t>(std::find(choices.begin(), choices.end(), c) - choices.begin())] += 1.0 / draws;
  }
  for (size_t l = 0; l < 3; ++l)
    for (size_t k = 0; k < 4; ++k) {
      double want = p[4 * l + k];
      for (size_t j = 0; j < 4; ++j)
        if (j != k) want += p[4 * l + j] * p[4 * l + k] / (1 - p[4 * l + j]);
      INFO("layer " << l << " count " << choices[k]);
      CHECK(std::abs(seen[4 * l + k] - want) < 0.025);
    }
  // The gradient reaches the sampled pair's logits only.
  SplitMix r3(5, 3, 1);
  const ForwardOptions g = arch.sampled_mixture(tau, r3);
  torch::Tensor loss = torch::zeros({});
  for (size_t l = 0; l < 3; ++l) loss = loss + g.heads[l].weights[0] * static_cast<double>(l + 1);
  loss.backward();
  const torch::Tensor grad = arch.logits().grad();
  REQUIRE(grad.defined());
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t k = 0; k < 4; ++k) {
      const auto& c = g.heads[static_cast<size_t>(l)].counts;
      const bool picked = std::find(c.begin(), c.end(), choices[static_cast<size_t>(k)]) != c.end();
      INFO("layer " << l << " count " << choices[static_cast<size_t>(k)]);
      CHECK((grad[l][k].item<double>() != 0.0) == picked);
    }
  // paths 0 (or >= K): the full mixture, every count.
  st.paths = 0;
  ArchitectureWeights full(3, choices, st, 100, torch::kCPU);
  SplitMix r4(1, 1, 1);
  CHECK(full.paths_run() == 4);
  CHECK(full.sampled_mixture(tau, r4).heads[2].counts == choices);
}

TEST_CASE("prism search trains one shared model, ranks the space and records it all in run.h5", "[search][run]") {
  Fixture f;
  const std::string out = f.dir.file("spos");
  auto r = run_prism(fmt::format("search {} --out {} search.finetune.steps=3 search.finetune.schedules=2", f.file("spos"), out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("search: single path") && Catch::Contains("16 schedules"));
  CHECK_THAT(r.output, Catch::Contains("ranking of") && Catch::Contains("decoded (rules 1-3):") &&
                           Catch::Contains("unconstrained:") && Catch::Contains("prism sweep " + out + "/top.yaml"));
  const auto rr = read_run(out + "/run.h5");
  CHECK(rr["attrs"]["status"] == "completed");
  // Per step, the schedule of each micro-batch (2 slots: 2 accumulated micro-batches), drawn
  // uniformly from the space as a pure function of (seed, step, slot).
  const std::vector<double> steps{1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(column(rr, "search/step") == steps);
  const auto heads = rows(rr, "search/heads");
  REQUIRE(heads.size() == 8);
  const auto space = ScheduleSpace::product(2, {1, 2, 4, 8}, 4, false);
  for (int step = 0; step < 8; ++step)
    for (int slot = 0; slot < 2; ++slot) {
      SplitMix rng(0, static_cast<uint64_t>(step), static_cast<uint64_t>(slot));
      const HeadSchedule s = space.sample(rng);
      CHECK(heads[step][2 * slot] == s[0]);
      CHECK(heads[step][2 * slot + 1] == s[1]);
    }
  // Per-layer scores at every validation (steps 0, 4, 8): 2 layers x 4 counts, and each layer's choice.
  const std::vector<double> validations{0, 4, 8};
  CHECK(column(rr, "search/scores/step") == validations);
  REQUIRE(rows(rr, "search/scores/score").at(2).size() == 8);
  // The ranking: the listed schedules among the exactly evaluated, best first.
  const auto& ds = rr["datasets"];
  const auto loss = ds["search/ranking/loss"].get<std::vector<double>>();
  const auto ranked = ds["search/ranking/heads"].get<std::vector<std::vector<int>>>();
  REQUIRE(loss.size() == ranked.size());
  REQUIRE(loss.size() >= 3);
  CHECK(std::is_sorted(loss.begin(), loss.end()));
  CHECK(std::find(ranked.begin(), ranked.end(), std::vector<int>{4, 4}) != ranked.end());
  CHECK(std::find(ranked.begin(), ranked.end(), std::vector<int>{8, 1}) != ranked.end());
  const auto hard = ds["search/ranking/hard_rules"].get<std::vector<int>>();
  for (size_t i = 0; i < ranked.size(); ++i) {
    INFO(i);
    CHECK((hard[i] == 1) == (ranked[i][0] <= ranked[i][1] && ranked[i][1] == 4));
  }
  const std::string csv = read_file(out + "/ranking.csv");
  CHECK_THAT(csv, Catch::StartsWith("rank,schedule,heads,loss,loss_se,estimate,hard_rules,guidelines,why"));
  // A finished search resumed trains nothing and ranks again from its final weights: the same ranking.
  auto again = run_prism("search --resume " + out);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("already at step 8 of 8; nothing left to train"));
  CHECK(read_file(out + "/ranking.csv") == csv);
  // top.yaml trains the 2 best under rules 1-3 and the baseline with seeds 0 and 1.
  auto dry = run_prism(fmt::format("sweep {}/top.yaml --dry-run", out));
  INFO(dry.output);
  REQUIRE(dry.exit_code == 0);
  CHECK_THAT(dry.output, Catch::Contains("trials") && Catch::Contains("seed"));
  CHECK(std::count(dry.output.begin(), dry.output.end(), '\n') >= 6);
  // finetune.yaml trains the 2 best ranked 3 steps each from the search's final weights; its
  // sweep runs, and each trial starts from those weights.
  CHECK_THAT(r.output, Catch::Contains(fmt::format("prism sweep {}/finetune.yaml --out {}/finetune", out, out)));
  const std::string ft = read_file(out + "/finetune.yaml");
  CHECK_THAT(ft, Catch::Contains("init_from: " + out) && Catch::Contains("max_steps: 3"));
  auto swept = run_prism(fmt::format("sweep {}/finetune.yaml --out {}/finetune --jobs 1", out, out));
  INFO(swept.output);
  REQUIRE(swept.exit_code == 0);
  std::vector<std::vector<int>> tuned;
  for (const auto& trial : fs::directory_iterator(out + "/finetune")) {
    if (!fs::exists(trial.path() / "config.yaml")) continue;
    CHECK_THAT(read_file((trial.path() / "config.yaml").string()), Catch::Contains("init_from: " + out));
    CHECK_THAT(read_file((trial.path() / "config.yaml").string()), Catch::Contains("max_steps: 3"));
    tuned.push_back(read_run((trial.path() / "run.h5").string())["attrs"]["heads"].get<std::vector<int>>());
  }
  std::sort(tuned.begin(), tuned.end());
  std::vector<std::vector<int>> best2{ranked[0], ranked[1]};
  std::sort(best2.begin(), best2.end());
  CHECK(tuned == best2);
  // The plot of how the choice evolved renders from the run.
  auto plot = run(fmt::format("'{}' '{}/scripts/plot/search.py' {} --out {}/search.png", PRISM_PYTHON, PRISM_SOURCE_DIR,
                              out, out));
  INFO(plot.output);
  CHECK(plot.exit_code == 0);
  CHECK(fs::file_size(out + "/search.png") > 10000);
}

TEST_CASE("kill -9 mid-search, then --resume, gives the search of an uninterrupted run", "[search][resume]") {
  // mixture-2: two of the four counts per layer sampled per micro-batch (search.mixture.paths).
  const std::string arm = GENERATE(as<std::string>(), "spos", "mixture", "mixture-2");
  INFO("arm " << arm);
  const std::string method = arm == "spos" ? "spos" : "mixture";
  const std::string paths = arm == "mixture-2" ? "search.mixture.paths=2" : "";
  auto with_paths = [&](std::vector<std::string> args) {
    if (!paths.empty()) args.push_back(paths);
    return args;
  };
  Fixture f;
  const std::string file = f.file(method);
  auto a = run_prism(fmt::format("search {} --out {} {}", file, f.dir.file("a"), paths));
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  const std::string b = f.dir.file("b");
  const Killed killed = run_prism_killed_at_checkpoint(with_paths({"search", file, "--out", b}), b, 4);
  REQUIRE(killed.saw_checkpoint);
  REQUIRE(killed.by_signal);
  auto r = run_prism("search --resume " + b);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("resumed"));
  const auto ra = read_run(f.dir.file("a/run.h5")), rb = read_run(b + "/run.h5");
  CHECK(rb["attrs"]["status"] == "completed");
  for (const char* key : {"train/step", "train/loss", "train/grad_norm", "val/loss", "search/step", "search/heads",
                          "search/weights", "search/temperature", "search/scores/score", "search/ranking/heads",
                          "search/ranking/loss"}) {
    INFO(key);
    CHECK(ra["datasets"][key] == rb["datasets"][key]);  // bit-equal (NaN reads as null on both sides)
  }
  CHECK(read_file(f.dir.file("a/ranking.csv")) == read_file(b + "/ranking.csv"));
  if (method == "mixture") {
    // The architecture weights: each row a distribution per layer, moving away from uniform as tau falls.
    const auto w = rows(ra, "search/weights");
    const std::vector<double> tau = column(ra, "search/temperature");
    REQUIRE(w.size() == 8);
    for (size_t l = 0; l < 2; ++l) {
      double sum = 0, top = 0;
      for (size_t k = 0; k < 4; ++k) {
        sum += w.back()[4 * l + k];
        top = std::max(top, w.back()[4 * l + k]);
      }
      CHECK(sum == Approx(1.0));
      CHECK(top > 0.3);  // uniform is 0.25
    }
    CHECK(std::is_sorted(tau.rbegin(), tau.rend()));
    CHECK(tau.front() > tau.back());
  }
}

TEST_CASE("a search on 2 data-parallel processes makes the choices and the ranking of 1 process", "[search][ddp]") {
  if (skip_without_distributed()) return;
  const std::string method = GENERATE(as<std::string>(), "spos", "mixture");
  INFO("method " << method);
  Fixture f;
  const std::string file = f.file(method, 6);
  auto one = run_prism(fmt::format("search {} --out {}", file, f.dir.file("one")));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  auto ranks = launch(2, {"search", file, "--out", f.dir.file("two")}, f.dir.path());
  wait_all(ranks);
  const std::string out0 = ranks[0].output(), out1 = ranks[1].output();
  INFO("rank 0:\n" << out0 << "\nrank 1:\n" << out1);
  REQUIRE(ranks[0].exit_code == 0);
  REQUIRE(ranks[1].exit_code == 0);
  CHECK_THAT(out0, Catch::Contains("data parallel: 2 processes") && Catch::Contains("weights identical on 2 ranks"));
  CHECK(out1.find("ranking") == std::string::npos);  // rank 0 reports
  const auto r1 = read_run(f.dir.file("one/run.h5")), r2 = read_run(f.dir.file("two/run.h5"));
  CHECK(r1["datasets"]["search/heads"] == r2["datasets"]["search/heads"]);
  check_close(column(r1, "train/loss"), column(r2, "train/loss"), 1e-5, "train/loss");
  check_close(column(r1, "val/loss"), column(r2, "val/loss"), 1e-5, "val/loss");
  check_close(column(r1, "search/ranking/loss"), column(r2, "search/ranking/loss"), 1e-5, "search/ranking/loss");
  if (method == "mixture") {
    const auto w1 = rows(r1, "search/weights"), w2 = rows(r2, "search/weights");
    REQUIRE(w1.size() == w2.size());
    for (size_t i = 0; i < w1.size(); ++i) check_close(w1[i], w2[i], 1e-5, "search/weights");
  }
}

TEST_CASE("a search runs on every CPU attention back end", "[search][run]") {
  Fixture f;
  const std::string file = f.file("mixture", 2);
  for (const char* backend : {"reference", "sdpa", "fused"}) {
    INFO(backend);
    auto r = run_prism(fmt::format("search {} --out {} attention.backend={}", file, f.dir.file(backend), backend));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains(fmt::format("attention {}", backend)) && Catch::Contains("decoded (rules 1-3)"));
  }
}

TEST_CASE("a search runs on the GPU with every GPU attention back end (skipped without one)", "[search][run][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device visible to LibTorch (a search on the GPU needs one)");
    return;
  }
  Fixture f;
  const std::string file = f.file("mixture", 2);
  for (const char* backend : {"sdpa", "cuda"}) {
    INFO(backend);
    auto r = run_prism(fmt::format("search {} --out {} train.device=cuda train.dtype=bf16 attention.backend={}", file,
                                   f.dir.file(backend), backend));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains(fmt::format("attention {}", backend)) && Catch::Contains("decoded (rules 1-3)"));
    CHECK(read_run(f.dir.file(std::string(backend) + "/run.h5"))["attrs"]["status"] == "completed");
  }
}

TEST_CASE("prism search --dry-run prints the search's cost next to the grid's, and bad files fail clearly",
          "[search][run]") {
  Fixture f;
  auto r = run_prism(fmt::format("search {} --dry-run", f.file("spos")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("search training") && Catch::Contains("ranking") &&
                           Catch::Contains("retraining the pick with 2 seeds") &&
                           Catch::Contains("the grid it replaces") && Catch::Contains("nothing was run"));
  CHECK_FALSE(fs::exists("runs/search-spos-8"));
  auto bad = run_prism(fmt::format("search {} search.space.heads=[3,4]", f.file("spos")));
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.output, Catch::Contains("3 heads do not divide d_model = 64") && Catch::Contains("Fix:"));
  auto one_path = run_prism(fmt::format("search {} search.method=mixture search.mixture.paths=1", f.file("spos")));
  CHECK(one_path.exit_code != 0);
  CHECK_THAT(one_path.output, Catch::Contains("search.mixture.paths") && Catch::Contains("no gradient") &&
                                  Catch::Contains("Fix:"));
  auto two = run_prism(fmt::format("search {} --dry-run search.mixture.paths=2", f.file("mixture")));
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK_THAT(two.output, Catch::Contains("2 of the 4 counts per layer sampled per micro-batch"));
  auto tuned = run_prism(fmt::format("search {} --dry-run search.finetune.steps=3", f.file("spos")));
  INFO(tuned.output);
  REQUIRE(tuned.exit_code == 0);
  CHECK_THAT(tuned.output, Catch::Contains("fine-tuning") && Catch::Contains("schedules x 3 steps from the shared weights"));
  CHECK_THAT(r.output, !Catch::Contains("fine-tuning"));
  auto none = run_prism(fmt::format("search {} '~search'", f.file("spos")));
  CHECK(none.exit_code != 0);
  CHECK_THAT(none.output, Catch::Contains("no `search:` section"));
  auto exists = run_prism(fmt::format("search {} --out {} search.method=spos", f.file("spos", 2), f.dir.file("x")));
  REQUIRE(exists.exit_code == 0);
  auto again = run_prism(fmt::format("search {} --out {}", f.file("spos", 2), f.dir.file("x")));
  CHECK(again.exit_code != 0);
  CHECK_THAT(again.output, Catch::Contains("a run already exists here") && Catch::Contains("--resume"));
}

TEST_CASE("a search plan takes its vocabulary from the prepared data, as its runs do, and costs with it",
          "[search][plan]") {
  // The dry run's cost once used the preset's 50257 ids while the runs trained on the data's
  // 4096: the embedding and logits dominate a small model, so it printed 7x the runs' FLOPs.
  TempDir dir("prism-search-vocab");
  const std::string data = prepared_data(dir);
  const std::string path = dir.file("search.yaml");
  write_file(path, fmt::format("model: {{preset: test-tiny}}\n"
                               "train: {{batch_size: 4, seq_len: 32, tokens_per_step: 256, max_steps: 8}}\n"
                               "data: {{dir: {}}}\n"
                               "search: {{space: {{heads: [1, 2, 4, 8]}}}}\n",
                               data));
  const SearchPlan plan = plan_search(path);
  CHECK(plan.config.model.vocab_size == 1000);  // the preset (test-tiny) has 512
  CHECK_THAT(format_search_dry_run(plan, "runs/x"), Catch::Contains("vocabulary 1000 (from " + data + ")"));
  const SearchPlan fixed = plan_search(path, {"model.vocab_size=50257"});
  CHECK(fixed.config.model.vocab_size == 50257);
  CHECK(search_cost(plan).run_flops < 0.5 * search_cost(fixed).run_flops);
  // search.yaml (what a run writes) records the number, so it is costed the same where the data
  // is not (a copied run folder; data.dir is read from the working directory).
  const std::string written = dir.file("written.yaml");
  write_file(written, search_config_yaml(plan));
  const SearchPlan elsewhere = plan_search(written, {"data.dir=" + dir.file("no-data-here")});
  CHECK(elsewhere.config.model.vocab_size == 1000);
  CHECK(plan_search(path, {"data.dir=" + dir.file("no-data-here")}).config.model.vocab_size == 512);  // the preset's
}

TEST_CASE("search.finetune.halving: finetune.yaml fine-tunes under successive halving, costed rung by rung",
          "[search][plan]") {
  TempDir dir("prism-search-ft-halving");
  const std::string data = prepared_data(dir);
  const std::string path = dir.file("search.yaml");
  write_file(path, fmt::format("model: {{preset: test-tiny, n_layer: 2}}\n"
                               "train: {{batch_size: 4, seq_len: 32, tokens_per_step: 256, max_steps: 8}}\n"
                               "data: {{dir: {}}}\n"
                               "search: {{space: {{heads: [1, 2, 4, 8]}}, finetune: {{steps: 9, warmup_steps: 3}}}}\n",
                               data));
  const std::vector<std::string> halving{"search.finetune.halving.eta=3", "search.finetune.halving.min_steps=3"};
  const SearchPlan plan = plan_search(path, halving);
  const SearchCost k = search_cost(plan);
  // 16 schedules x 3 steps, then the best ceil(16 / 3) = 6 x 9: sweep halving's promotion count.
  REQUIRE(k.exact == 16);
  REQUIRE(k.finetune_rungs.size() == 2);
  CHECK(k.finetune_rungs[0].schedules == 16);
  CHECK(k.finetune_rungs[0].steps == 3);
  CHECK(k.finetune_rungs[1].schedules == 6);
  CHECK(k.finetune_rungs[1].steps == 9);
  // Its FLOPs are those of the plain fine-tunes it is made of: 16 runs of 3 steps and 6 of 9, each
  // with one held-out evaluation.
  const double f3 = search_cost(plan_search(path, {"search.finetune.steps=3"})).finetune_flops / 16;
  const double f9 = search_cost(plan).finetune_flops;
  const double plain9 = search_cost(plan_search(path)).finetune_flops / 16;
  CHECK(f9 == Approx(16 * f3 + 6 * plain9));
  CHECK(f9 > 16 * f3 + 5 * plain9);  // the second rung counted (6 of them, not fewer)
  const std::string dry = format_search_dry_run(plan, "runs/x");
  CHECK_THAT(dry, Catch::Contains("16 schedules x 3 steps, then the best 6 x 9 from the shared weights under successive halving"));
  // finetune.yaml carries the halving to the sweep, which plans its rungs from it.
  Ranking r;
  for (int a : {1, 2, 4, 8})
    for (int b : {1, 2, 4, 8}) {
      RankedSchedule e;
      e.schedule = HeadSchedule(std::vector<int>{a, b});
      e.loss = 5.0 + a * 0.01 + b * 0.001;
      r.ranked.push_back(e);
    }
  const std::string ft = dir.file("finetune.yaml");
  write_file(ft, finetune_sweep_yaml(plan, r, dir.file("run")));
  const SweepPlan sweep = plan_sweep(ft);
  CHECK(sweep.settings.halving.enabled);
  CHECK(sweep.settings.halving.eta == 3);
  CHECK(sweep.settings.halving.min_steps == 3);
  CHECK(sweep.trials.size() == 16);
  CHECK_THAT(sweep.trials.front().config, Catch::Contains("max_steps: 9") && Catch::Contains("warmup_steps: 3"));
  CHECK(rung_budgets(9, sweep.settings.halving) == (std::vector<int64_t>{3, 9}));
  CHECK_THAT(read_file(ft), Catch::Contains("16 schedules x 3 steps, then the best 6 x 9"));
  // A first rung that leaves no room below the last is refused, naming the key.
  try {
    plan_search(path, {"search.finetune.halving.min_steps=9"});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("search.finetune.halving") && Catch::Contains("min_steps"));
  }
}

TEST_CASE("every shipped search file plans, and search plus retraining costs less than the grid it names",
          "[search][shipped]") {
  const fs::path dir = source_path("experiments/search");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    INFO(e.path().string());
    SearchPlan plan;
    REQUIRE_NOTHROW(plan = plan_search(e.path().string()));
    CHECK(plan.space.size() >= 2);
    CHECK(plan.grid.size() >= 2);
    CHECK(plan.grid_source == "the sweep section the search file builds on");
    const SearchCost k = search_cost(plan);
    CHECK(k.total() > 0);
    CHECK(k.total() < 0.25 * k.grid_flops);
    CHECK_THAT(format_search_dry_run(plan, "runs/x"), Catch::Contains("the grid it replaces"));
  }
  CHECK(files >= 4);  // cpu-128 and the three paper scales
}

TEST_CASE("the shipped ground truth of the CPU search: >= 12 schedules x 3 paired seeds, rule breakers included",
          "[search][shipped]") {
  const SweepPlan plan = plan_sweep(source_path("experiments/search/ground-truth/cpu-128.yaml"));
  std::map<std::vector<int>, std::set<uint64_t>> seeds;
  for (const auto& t : plan.trials) seeds[t.schedule.heads()].insert(t.seed);
  CHECK(seeds.size() >= 12);
  int breakers = 0;
  const std::set<uint64_t> paired{0, 1, 2};
  for (const auto& s : seeds) {
    INFO(HeadSchedule(s.first).compact());
    CHECK(s.second == paired);
    const auto& h = s.first;
    breakers += !std::is_sorted(h.begin(), h.end()) || h.back() != 4;
  }
  CHECK(breakers >= 3);
  // The search space holds every one of them, so a search ranks them all.
  const auto space = ScheduleSpace::product(6, {1, 2, 4, 8, 16}, 4, false);
  for (const auto& s : seeds) CHECK(space.contains(HeadSchedule(s.first)));
}

TEST_CASE("prism bench search times each method against plain training steps", "[search][bench]") {
  Fixture f;
  auto r = run_prism(fmt::format("bench search {} --steps 2 --warmup 1 --threads 1 --methods spos,mixture,mixture:2",
                                 f.file("spos")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("plain training") && Catch::Contains("run of 8 steps"));
  // Each arm's line ends with its run ratio, e.g. "1.293x"; plain training's is 1.00x.
  for (const char* arm : {"search, spos", "search, mixture 4/4", "search, mixture 2/4"}) {
    const auto at = r.output.find(std::string("\n") + arm);
    REQUIRE(at != std::string::npos);
    const std::string line = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
    INFO(line);
    CHECK(line.back() == 'x');
    const double ratio = std::stod(line.substr(line.rfind(' ') + 1));
    CHECK(ratio > 0.2);
    CHECK(ratio < 50);
  }
}
