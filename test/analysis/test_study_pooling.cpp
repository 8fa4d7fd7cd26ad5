// Which runs `prism report` pools: only runs whose resolved configs agree on
// everything but seed and schedule. Two tiny sweeps that differ in train.lr are
// two experiments, reported apart and never mixed; the same sweep twice is the
// same runs, kept once with a note. Then the parameter count (the checkpoints')
// and the throughput the report measures itself with prism bench train.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "prism/store/run_reader.h"
#include "prism/store/table.h"
#include "support.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

// test-tiny exactly (2 layers x 64, 4 heads, context 32, vocabulary 512), so prism bench train can build it.
std::string tiny_sweep(const std::string& shards, const std::string& name, const std::string& lr) {
  return fmt::format(
      "model: {{preset: test-tiny}}\n"
      "schedule: {{heads: [4, 4]}}\n"
      "train: {{batch_size: 2, seq_len: 16, max_steps: 6, lr: {}, warmup_steps: 2, eval_every: 3, eval_tokens: 64,\n"
      "        distance_every: 0, distance_batch: 1, checkpoint_every: 0, log_every: 3, dtype: fp32}}\n"
      "data: {{dir: {}}}\n"
      "sweep:\n  name: {}\n  grid:\n    schedule.heads: [[2, 4]]\n    train.seed: [0, 1]\n  jobs: 2\n  threads: 2\n",
      lr, shards, name);
}

std::vector<std::string> column(const prism::CsvFile& t, const std::string& name) {
  auto it = std::find(t.header.begin(), t.header.end(), name);
  REQUIRE(it != t.header.end());
  std::vector<std::string> out;
  for (const auto& row : t.rows) out.push_back(row[static_cast<size_t>(it - t.header.begin())]);
  return out;
}

// The final validation loss of a sweep's trial, found through its summary.csv.
double final_loss(const std::string& sweep, const std::string& schedule, const std::string& seed) {
  auto summary = prism::read_csv(sweep + "/summary.csv");
  const auto sched = column(summary, "schedule"), seeds = column(summary, "seed"), dirs = column(summary, "run_dir");
  for (size_t i = 0; i < sched.size(); ++i)
    if (sched[i] == schedule && seeds[i] == seed) return prism::RunReader(sweep + "/" + dirs[i]).val().back().loss;
  FAIL("no trial " << schedule << " seed " << seed << " in " << sweep);
  return 0;
}

}  // namespace

TEST_CASE("prism report keys runs on their resolved config: different experiments are never pooled",
          "[analysis][report][sweep]") {
  TempDir dir("prism-pooling");
  const std::string shards = dir.file("shards");
  auto r = run_reference("make_shards.py", shards + " --vocab 512 --train-tokens 20000 --val-tokens 4000");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, std::string> sweeps;  // lr -> sweep dir
  for (const char* lr : {"3.0e-3", "1.0e-3"}) {
    const std::string name = std::string("lr") + lr;
    write_file(dir.file(name + ".yaml"), tiny_sweep(shards, name, lr));
    sweeps[lr] = dir.file(name);
    r = run_prism(fmt::format("sweep {} --out {}", dir.file(name + ".yaml"), sweeps[lr]));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }

  // Two learning rates: four configurations, each schedule against the uniform runs of its own lr.
  const std::string rep = dir.file("report");
  r = run_prism(fmt::format("report {} {} --out {} --milestones 2", sweeps["3.0e-3"], sweeps["1.0e-3"], rep));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, !Catch::Contains("already in") && !Catch::Contains("same configuration and seed"));
  auto loss = prism::read_csv(rep + "/final_loss.csv");
  REQUIRE(loss.rows.size() == 4);  // today: 2, the second sweep's runs dropped as "already in"
  const auto settings = column(loss, "settings");
  CHECK(std::count(settings.begin(), settings.end(), "train.lr=0.003") == 2);
  CHECK(std::count(settings.begin(), settings.end(), "train.lr=0.001") == 2);
  // Each difference pairs the two seeds of one sweep: the paired table's losses are that sweep's runs.
  auto paired = prism::read_csv(rep + "/paired.csv");
  REQUIRE(paired.rows.size() == 4);
  const auto p_settings = column(paired, "settings"), seeds = column(paired, "seed"), mine = column(paired, "val_loss"),
             theirs = column(paired, "uniform_val_loss");
  for (size_t i = 0; i < paired.rows.size(); ++i) {
    const std::string sweep = sweeps[p_settings[i] == "train.lr=0.003" ? "3.0e-3" : "1.0e-3"];
    const double u = final_loss(sweep, "uniform", seeds[i]), p = final_loss(sweep, "2,4", seeds[i]);
    CHECK(std::stod(theirs[i]) == Approx(u).epsilon(1e-12));
    CHECK(std::stod(mine[i]) == Approx(p).epsilon(1e-12));
  }
  const std::string md = prism::test::read_file(rep + "/report.md");
  INFO(md);
  CHECK_THAT(md, Catch::Contains("differ in train.lr besides seed and schedule") &&
                     Catch::Contains("uniform (4,4; train.lr=0.001)"));
  // The parameter count is the checkpoints': test-tiny with its 512-id vocabulary.
  const std::string ckpt = sweeps["3.0e-3"] + "/" + column(prism::read_csv(sweeps["3.0e-3"] + "/summary.csv"), "run_dir")[0];
  auto count = run(fmt::format("'{}' -c \"import sys, safetensors.numpy as s, glob; "
                               "f = sorted(glob.glob(sys.argv[1] + '/checkpoints/step_*/model.safetensors'))[-1]; "
                               "print(sum(v.size for v in s.load_file(f).values()))\" {}",
                               PRISM_PYTHON, ckpt));
  INFO(count.output);
  REQUIRE(count.exit_code == 0);
  const std::string expected = count.output.substr(0, count.output.find('\n'));
  for (const auto& n : column(loss, "parameters")) CHECK(n == expected);

  // The same sweep twice: the same runs, kept once, with a note naming both losses.
  const std::string copy = dir.file("copy");
  fs::copy(sweeps["3.0e-3"], copy, fs::copy_options::recursive);
  r = run_prism(fmt::format("report {} {} --out {}", sweeps["3.0e-3"], copy, dir.file("report-copy")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(prism::read_csv(dir.file("report-copy/final_loss.csv")).rows.size() == 2);
  CHECK_THAT(r.output, Catch::Contains("4 trial(s) are the same configuration and seed as runs of") &&
                           Catch::Contains("their final validation losses are identical"));

  // Throughput: measured by the report with prism bench train, never from the runs' own times.
  const std::string thr = dir.file("report-bench");
  r = run_prism(fmt::format("report {} --out {} --bench-steps 2 --bench-warmup 1", sweeps["3.0e-3"], thr));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto t = prism::read_csv(thr + "/throughput.csv");
  REQUIRE(t.rows.size() == 1);
  CHECK(column(t, "measured")[0] == "1");
  CHECK(column(t, "dtype")[0] == "fp32");
  CHECK(std::stod(column(t, "ratio_to_uniform")[0]) > 0);
  CHECK_THAT(column(t, "command")[0], Catch::Contains("prism bench train --model test-tiny --vocab 512 --heads 2,4"));
  CHECK_FALSE(column(t, "machine")[0].empty());
  CHECK_THAT(prism::test::read_file(thr + "/report.md"),
             Catch::Contains("tokens/s vs uniform") && Catch::Contains("Measured by this report with `prism bench train`"));
  // Without --bench-steps the column is not there at all.
  CHECK_THAT(md, !Catch::Contains("| tokens/s vs uniform") && Catch::Contains("Not measured"));
}

TEST_CASE("prism report never pools runs that trained in different dtypes, whatever their configs said",
          "[analysis][report][sweep][dtype]") {
  TempDir dir("prism-pooling-dtype");
  const std::string shards = dir.file("shards");
  auto r = run_reference("make_shards.py", shards + " --vocab 512 --train-tokens 20000 --val-tokens 4000");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // dtype auto: the sweep's runs train in what auto resolves to here, and record it.
  std::string yaml = tiny_sweep(shards, "auto", "3.0e-3");
  yaml.replace(yaml.find("dtype: fp32"), 11, "dtype: auto");
  write_file(dir.file("auto.yaml"), yaml);
  r = run_prism(fmt::format("sweep {} --out {}", dir.file("auto.yaml"), dir.file("auto")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto ran = column(prism::read_csv(dir.file("auto/summary.csv")), "dtype");
  REQUIRE(ran.size() == 4);
  REQUIRE((ran[0] == "fp32" || ran[0] == "bf16"));
  CHECK(std::count(ran.begin(), ran.end(), ran[0]) == 4);
  CHECK_THAT(read_file(dir.file("auto/ranking.txt")), Catch::Contains("every run trained in " + ran[0]));
  // The same schedules and seeds in the other dtype.
  const std::string other = ran[0] == "fp32" ? "bf16" : "fp32";
  r = run_prism(fmt::format("sweep {} --out {} train.dtype={}", dir.file("auto.yaml"), dir.file("other"), other));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(column(prism::read_csv(dir.file("other/summary.csv")), "dtype")[0] == other);

  r = run_prism(fmt::format("report {} {} --out {}", dir.file("auto"), dir.file("other"), dir.file("report")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto loss = prism::read_csv(dir.file("report/final_loss.csv"));
  REQUIRE(loss.rows.size() == 4);  // pooled, it would be 2 configurations of 4 runs each
  const auto settings = column(loss, "settings");
  CHECK(std::count(settings.begin(), settings.end(), "train.dtype=" + ran[0]) == 2);  // as it ran, not "auto"
  CHECK(std::count(settings.begin(), settings.end(), "train.dtype=" + other) == 2);
  CHECK_THAT(r.output + read_file(dir.file("report/report.md")),
             Catch::Contains("the runs trained in different dtypes (") && Catch::Contains("they are not pooled") &&
                 !Catch::Contains("same configuration and seed"));
}
