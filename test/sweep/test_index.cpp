// The sweep index (index.h) as h5py readers rely on it: sweep.h5's groups,
// column names and dtypes, written through the store (result_file.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "prism/store/result_file.h"
#include "prism/sweep/index.h"
#include "prism/sweep/plan.h"
#include "sweep/sweep_support.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

using Type = ResultArray::Type;

void check_type(const ResultGroup& g, const std::string& name, Type type, const std::string& path) {
  INFO(name);
  CHECK(g.at(name, path).type == type);
}

}  // namespace

TEST_CASE("sweep.h5 keeps its schema: trials, ranking and halving columns with their dtypes", "[sweep][index]") {
  TempDir dir("prism-index");
  write_file(dir.file("s.yaml"), tiny_base("/no/data") +
                                     "sweep:\n  name: idx\n  halving: {eta: 2, min_steps: 2}\n  grid:\n"
                                     "    schedule.heads: [[2, 2, 4, 4]]\n    train.lr: [1.0e-3]\n"
                                     "    train.seed: [0, 5000000000]\n");
  const SweepPlan plan = plan_sweep(dir.file("s.yaml"));
  REQUIRE(plan.trials.size() == 4);
  const std::string out = dir.file("out");
  fs::create_directories(out);
  write_file(out + "/sweep.yaml", plan_to_yaml(plan));
  std::vector<PromotionDecision> decisions{{0, 2, plan.trials[0].group, 4.5, 1, true, "baseline"}};
  auto outcomes = collect_outcomes(plan, out, decisions);
  outcomes[1].status = "completed";
  outcomes[1].final_val = outcomes[1].best_val = 4.25;
  outcomes[1].steps = 6;
  outcomes[1].final_val_se = 0.0625;
  outcomes[1].unigram = 6.5;
  outcomes[1].dtype = "bf16";
  outcomes[1].budget_steps = plan.trials[1].max_steps;
  const auto rows = rank_configurations(plan, outcomes);
  REQUIRE(rows.size() == 1);
  write_index(plan, out, outcomes, rows, decisions);

  const std::string h5 = out + "/sweep.h5";
  const ResultGroup g = read_result_file(h5);
  CHECK(g.string("name", h5) == "idx");
  CHECK(g.string("source", h5) == plan.source);
  CHECK(g.string("sweep", h5) == plan_to_yaml(plan));
  CHECK(g.string("prism_version", h5) == PRISM_VERSION);
  for (const char* s : {"name", "group", "schedule", "status", "message", "run_dir", "dtype", "param/train.lr"})
    check_type(g, std::string("trials/") + s, Type::String, h5);
  check_type(g, "trials/seed", Type::UInt64, h5);
  for (const char* s : {"baseline", "rung", "n_layer", "heads"}) check_type(g, std::string("trials/") + s, Type::Int32, h5);
  for (const char* s : {"steps", "tokens", "tokens_all_rungs"}) check_type(g, std::string("trials/") + s, Type::Int64, h5);
  for (const char* s : {"best_val_loss", "final_val_loss", "final_val_loss_se", "unigram_val_loss", "wall_s",
                        "wall_s_all_rungs"})
    check_type(g, std::string("trials/") + s, Type::Float64, h5);
  CHECK(g.strings("trials/name", h5)[1] == plan.trials[1].name);
  CHECK(g.at("trials/seed", h5).unsigned_integer[1] == 5000000000ull);
  CHECK(g.strings("trials/param/train.lr", h5) == std::vector<std::string>(4, "1.0e-3"));
  CHECK(g.strings("trials/status", h5) == std::vector<std::string>{"pending", "completed", "pending", "pending"});
  CHECK(g.integers("trials/baseline", h5) == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(g.at("trials/heads", h5).shape == std::vector<uint64_t>{4, 4});
  CHECK(g.integers("trials/heads", h5)[8] == 2);  // row 2: [2, 2, 4, 4]
  CHECK(g.reals("trials/final_val_loss", h5)[1] == 4.25);
  CHECK(std::isnan(g.reals("trials/final_val_loss", h5)[0]));
  CHECK(g.reals("trials/final_val_loss_se", h5)[1] == 0.0625);
  CHECK(g.reals("trials/unigram_val_loss", h5)[1] == 6.5);
  CHECK(std::isnan(g.reals("trials/unigram_val_loss", h5)[0]));
  CHECK(g.strings("trials/dtype", h5) == std::vector<std::string>{"", "bf16", "", ""});  // what ran; "" not run
  // summary.csv and the ranked table carry them too.
  const std::string csv = read_file(out + "/summary.csv");
  CHECK_THAT(csv, Catch::Contains(",final_val_loss_se,unigram_val_loss,dtype,run_dir,message\n"));
  CHECK_THAT(csv, Catch::Contains(",0.062500,6.500000,bf16,"));
  CHECK_THAT(read_file(out + "/ranking.txt"),
             Catch::Contains("unigram baseline 6.5000 nats (the loss of a model that ignores context); a run's final "
                             "val loss has a standard error of 0.0625 over its validation batches; every run trained in bf16"));

  for (const char* s : {"group", "schedule", "params"}) check_type(g, std::string("ranking/") + s, Type::String, h5);
  for (const char* s : {"seeds_done", "seeds_total", "baseline"}) check_type(g, std::string("ranking/") + s, Type::Int32, h5);
  for (const char* s : {"val_loss_mean", "val_loss_std", "diff_to_baseline"})
    check_type(g, std::string("ranking/") + s, Type::Float64, h5);
  CHECK(g.strings("ranking/group", h5) == std::vector<std::string>{plan.trials[1].group});
  CHECK(g.integers("ranking/seeds_done", h5) == std::vector<int64_t>{1});
  CHECK(g.integers("ranking/seeds_total", h5) == std::vector<int64_t>{2});
  CHECK(g.reals("ranking/val_loss_mean", h5) == std::vector<double>{4.25});

  for (const char* s : {"group", "reason"}) check_type(g, std::string("halving/") + s, Type::String, h5);
  for (const char* s : {"rung", "rank", "promoted"}) check_type(g, std::string("halving/") + s, Type::Int32, h5);
  for (const char* s : {"steps", "budgets"}) check_type(g, std::string("halving/") + s, Type::Int64, h5);
  check_type(g, "halving/val_loss", Type::Float64, h5);
  CHECK(g.strings("halving/reason", h5) == std::vector<std::string>{"baseline"});
  CHECK(g.integers("halving/budgets", h5) == rung_budgets(6, plan.settings.halving));
  CHECK(g.arrays.size() == 22 + 9 + 8);  // no column more or less: trials (one param), ranking, halving
}
