// The study report's statistics and labels on runs made up here (no training, so
// seconds): paired loss differences and their Welch fallback, Delta D_l seed
// intervals paired by seed, Holm's adjustment of each family, milestone ratios
// paired by seed and McNemar's test on the same items, all against
// test/reference/study_stats_reference.py (numpy and scipy); then the labels a
// reader sees.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "prism/analysis/study_report.h"
#include "prism/analysis/throughput_bench.h"
#include "prism/config/model_config.h"
#include "prism/error.h"
#include "prism/schedule/head_schedule.h"
#include "prism/store/table.h"
#include "support.h"

using namespace prism;
using namespace prism::test;
using json = nlohmann::json;

namespace {

struct MadeRun {
  std::vector<int> heads;
  uint64_t seed;
  double offset;  // the configuration's effect on the loss
};

// A run with a validation curve, a held-out distance profile and per-item zero-shot results,
// drawn from `rng`; the seed's own effect (shared by every schedule) makes pairing matter.
StudyRun make_run(const MadeRun& m, std::mt19937& rng, const std::string& lr = "0.002") {
  std::normal_distribution<double> noise(0.0, 1.0);
  std::mt19937 seed_rng(static_cast<uint32_t>(1000 + m.seed));  // the seed's effect: the same for every schedule
  std::normal_distribution<double> seed_noise(0.0, 1.0);
  const double seed_effect = 0.02 * seed_noise(seed_rng);
  StudyRun r;
  r.name = fmt::format("h{}_seed{}", HeadSchedule(m.heads).compact(), m.seed);
  r.sweep = "made-up";
  r.heads = m.heads;
  r.uniform = m.heads == std::vector<int>{4, 4};
  r.seed = m.seed;
  r.experiment = {{"model.preset", "test-tiny"}, {"train.lr", lr}, {"train.max_steps", "60"}};
  r.max_steps = 60;
  for (int64_t step = 0; step <= 60; step += 10) {
    const double loss = 5.0 - 2.0 * (1 - std::exp(-static_cast<double>(step) / 20.0)) + m.offset + seed_effect +
                        0.01 * noise(rng);
    r.val.push_back({step, step * 512, loss, 0.02});
  }
  r.steps = 60;
  r.tokens = 60 * 512;
  r.unigram = 6.0;
  r.parameters = 999950;
  r.parameters_from = "checkpoint";
  r.vocab_size = 512;
  DistanceProfile p;
  p.heads = m.heads;
  p.source = r.name;
  p.seed = m.seed;
  p.tokens_id = "made-up tokens";
  p.seq_len = 32;
  p.batch = 2;
  for (int b = 0; b < 4; ++b) {
    std::vector<std::vector<double>> layers, normalized;
    for (size_t l = 0; l < m.heads.size(); ++l) {
      std::vector<double> heads, norm;
      for (int h = 0; h < m.heads[l]; ++h) {
        heads.push_back(8.0 + 2.0 * static_cast<double>(l) + 50 * seed_effect - 0.3 * m.heads[l] + 0.2 * noise(rng));
        norm.push_back(0.3 + 0.01 * static_cast<double>(l) + seed_effect - 0.01 * m.heads[l] + 0.01 * noise(rng));
      }
      layers.push_back(heads);
      normalized.push_back(norm);
    }
    p.by_batch.push_back(layers);
    p.normalized_by_batch.push_back(normalized);
  }
  r.profile = p;
  StudyEval e;
  e.task = "piqa";
  std::bernoulli_distribution right(0.55 - m.offset);
  for (int i = 0; i < 40; ++i) {
    e.item_line.push_back(i);
    e.right_norm.push_back(right(rng));
  }
  double hits = 0;
  for (bool x : e.right_norm) hits += x ? 1 : 0;
  e.n = 40;
  e.acc = e.acc_norm = hits / 40;
  e.acc_stderr = e.acc_norm_stderr = std::sqrt(e.acc_norm * (1 - e.acc_norm) / 39);
  r.evals = {e};
  return r;
}

Study make_study(const std::vector<MadeRun>& made, std::mt19937& rng, const std::vector<std::string>& lrs = {}) {
  Study s;
  s.sweeps = {"made-up"};
  for (size_t i = 0; i < made.size(); ++i) s.runs.push_back(make_run(made[i], rng, lrs.empty() ? "0.002" : lrs[i]));
  group_study(s, std::vector<RunShape>(s.runs.size(), RunShape{"made-up", 2, 64, 4}));
  return s;
}

std::vector<MadeRun> design() {
  std::vector<MadeRun> out;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    out.push_back({{4, 4}, seed, 0.0});
    out.push_back({{2, 4}, seed, 0.004});
  }
  for (uint64_t seed = 0; seed < 3; ++seed) out.push_back({{1, 4}, seed, 0.02});
  for (uint64_t seed = 10; seed < 13; ++seed) out.push_back({{4, 2}, seed, 0.01});  // no seed in common: Welch
  return out;
}

json spec_of(const Study& s, double confidence) {
  json configs = json::array();
  for (const auto& c : s.scales.front().configs) {
    json runs = json::array();
    for (const auto* r : c.runs) {
      json val = json::array(), items = json::array();
      for (const auto& v : r->val) val.push_back({v.step, v.loss});
      for (bool x : r->evals.front().right_norm) items.push_back(x ? 1 : 0);
      runs.push_back({{"seed", r->seed},
                      {"final", r->final_val()},
                      {"val", val},
                      {"distance", r->profile->by_batch},
                      {"normalized", r->profile->normalized_by_batch},
                      {"items", items}});
    }
    configs.push_back({{"schedule", c.schedule}, {"uniform", c.uniform}, {"runs", runs}});
  }
  return {{"confidence", confidence}, {"configs", configs}};
}

size_t column_of(const CsvFile& t, const std::string& column) {
  const size_t col = static_cast<size_t>(std::find(t.header.begin(), t.header.end(), column) - t.header.begin());
  REQUIRE(col < t.header.size());
  return col;
}

std::string cell(const CsvFile& t, const std::string& schedule, const std::string& column) {
  const size_t col = static_cast<size_t>(std::find(t.header.begin(), t.header.end(), column) - t.header.begin());
  const size_t sched = static_cast<size_t>(std::find(t.header.begin(), t.header.end(), "schedule") - t.header.begin());
  REQUIRE(col < t.header.size());
  for (const auto& row : t.rows)
    if (row[sched] == schedule) return row[col];
  FAIL("no row for " << schedule);
  return "";
}

}  // namespace

TEST_CASE("study report statistics against scipy: paired loss and Delta D_l intervals, Holm, milestones, McNemar",
          "[analysis][report][stats]") {
  TempDir dir("prism-study-stats");
  std::mt19937 rng(7);
  ReportOptions o;
  o.sweeps = {"made-up"};
  o.confidence = 0.95;
  o.milestones = 4;
  StudyReport rep = build_study_report(make_study(design(), rng), o);
  REQUIRE(rep.scales.size() == 1);
  REQUIRE(rep.scales.front().configs.size() == 4);
  write_study_report(rep, dir.path());
  write_file(dir.file("spec.json"), spec_of(rep.study, o.confidence).dump());
  auto r = run_reference("study_stats_reference.py", dir.file("spec.json") + " " + dir.path());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("ok "));

  // A margin of 0.05 nats: the same runs, now with equivalence verdicts, recomputed by the reference too.
  TempDir wide_dir("prism-study-stats-wide");
  std::mt19937 rng2(7);
  ReportOptions wide = o;
  wide.margin = 0.05;
  StudyReport wide_rep = build_study_report(make_study(design(), rng2), wide);
  write_study_report(wide_rep, wide_dir.path());
  json wide_spec = spec_of(wide_rep.study, o.confidence);
  wide_spec["margin"] = 0.05;
  write_file(wide_dir.file("spec.json"), wide_spec.dump());
  auto rw = run_reference("study_stats_reference.py", wide_dir.file("spec.json") + " " + wide_dir.path());
  INFO(rw.output);
  CHECK(rw.exit_code == 0);
  const auto wide_loss = read_csv(wide_dir.file("final_loss.csv"));
  CHECK(cell(wide_loss, "2,4", "verdict") == "equivalent");
  CHECK(cell(wide_loss, "2,4", "margin") == "0.05");
  CHECK_THAT(read_file(wide_dir.file("report.md")),
             Catch::Contains("### Power, equivalence and verdicts") && Catch::Contains("**equivalent within ±0.0500**"));

  // Seeds until resolved: a design 2:1:5 over the same runs. Its table recomputes from paired.csv
  // by the design's own rule (seeds ascending, the first n pairs at each look).
  TempDir seq_dir("prism-study-stats-seq");
  std::mt19937 rng3(7);
  ReportOptions seq = wide;
  seq.sequential = SequentialDesign{2, 1, 5};
  StudyReport seq_rep = build_study_report(make_study(design(), rng3), seq);
  write_study_report(seq_rep, seq_dir.path());
  REQUIRE(seq_rep.scales.front().sequential.has_value());
  const SequentialState& st = *seq_rep.scales.front().sequential;
  const auto seq_csv = read_csv(seq_dir.file("sequential.csv"));
  const auto paired = read_csv(seq_dir.file("paired.csv"));
  std::vector<std::vector<double>> diffs;
  std::vector<std::string> names;
  for (const auto* cr : st.comparisons) {
    std::map<long, double> by_seed;
    for (const auto& row : paired.rows)
      if (row[column_of(paired, "schedule")] == cr->config->schedule)
        by_seed[std::stol(row[column_of(paired, "seed")])] = std::stod(row[column_of(paired, "diff")]);
    std::vector<double> x;
    for (const auto& [seed, v] : by_seed) x.push_back(v);
    diffs.push_back(x);
    names.push_back(cr->config->schedule);
  }
  REQUIRE(!diffs.empty());
  SequentialDesign d{2, 1, 5};
  d.margin = 0.05;
  const auto history = sequential_history(d, diffs, st.pairs);
  CHECK(seq_csv.rows.size() == history.size() * names.size());
  for (const auto& row : seq_csv.rows) {
    const size_t look = std::stoul(row[column_of(seq_csv, "look")]) - 1;
    const size_t c = static_cast<size_t>(std::find(names.begin(), names.end(), row[column_of(seq_csv, "schedule")]) - names.begin());
    REQUIRE(c < names.size());
    const std::string want = history[look][c].empty() ? "unresolved" : history[look][c];
    CHECK(row[column_of(seq_csv, "verdict")] == want);
  }
  CHECK_THAT(read_file(seq_dir.file("report.md")), Catch::Contains("### Seeds until resolved") && Catch::Contains("Now: "));
  CHECK(read_file_or_empty(dir.file("sequential.csv")).empty());  // only with a design

  // The Welch configuration says so, with its run counts; the paired ones with their seeds.
  auto loss = read_csv(dir.file("final_loss.csv"));
  CHECK(cell(loss, "4,2", "verdict") != "");  // a Welch comparison has a verdict too (no TOST: better, worse or unresolved)
  CHECK(cell(loss, "4,2", "tost_p") == "");
  CHECK(cell(loss, "uniform", "verdict") == "");
  CHECK(cell(loss, "4,2", "diff_method") == "welch");
  CHECK(cell(loss, "4,2", "diff_runs") == "3");
  CHECK(cell(loss, "4,2", "diff_baseline_runs") == "5");
  CHECK(cell(loss, "2,4", "diff_pairs") == "5");
  CHECK(cell(loss, "uniform", "parameters") == "999950");
  // Delta D_l seed intervals are paired where seeds pair up; the D_l/i intervals are exported.
  auto delta = read_csv(dir.file("delta.csv"));
  CHECK(cell(delta, "2,4", "seed_method") == "paired");
  CHECK(cell(delta, "2,4", "seed_pairs") == "5");
  CHECK(cell(delta, "4,2", "seed_method") == "welch");
  CHECK_FALSE(cell(delta, "2,4", "seed_ci_normalized_lo").empty());
  CHECK_FALSE(cell(delta, "2,4", "batch_ci_normalized_hi").empty());
  const std::string md = read_file(dir.file("report.md"));
  INFO(md);
  for (const char* s : {"(Welch, 3 vs 5 runs)", "(paired, 5 seeds)", "Holm", "CI batches (these models)",
                        "not evidence about the schedule", "McNemar", "999,950"})
    CHECK_THAT(md, Catch::Contains(s));
  // Today's report printed "(welch, 0 seeds)" and called every ± a Student-t interval.
  CHECK_THAT(md, !Catch::Contains("0 seeds") && !Catch::Contains("Every interval is a"));
}

TEST_CASE("study report labels: confidence, one milestone, uniform settings, counts, --help",
          "[analysis][report]") {
  TempDir dir("prism-study-labels");
  std::mt19937 rng(11);
  // Two learning rates: the scale's runs differ in train.lr, so every configuration names it,
  // uniform ones included, and each schedule is compared with the uniform runs of its own lr.
  std::vector<MadeRun> made;
  std::vector<std::string> lrs;
  for (const char* lr : {"0.001", "0.003"})
    for (uint64_t seed = 0; seed < 2; ++seed) {
      made.push_back({{4, 4}, seed, 0.0});
      made.push_back({{2, 4}, seed, 0.01});
      lrs.push_back(lr);
      lrs.push_back(lr);
    }
  ReportOptions o;
  o.sweeps = {"made-up"};
  o.confidence = 0.995;
  o.milestones = 1;
  StudyReport rep = build_study_report(make_study(made, rng, lrs), o);
  REQUIRE(rep.scales.front().configs.size() == 4);
  CHECK(rep.scales.front().scale->varying == std::vector<std::string>{"train.lr"});
  for (const auto& cr : rep.scales.front().configs)
    if (!cr.config->uniform) {
      REQUIRE(cr.baseline);
      CHECK(cr.baseline->settings == cr.config->settings);
    }
  const std::string md = report_markdown(rep);
  INFO(md);
  CHECK_THAT(md, Catch::Contains("99.5% Student-t interval") && !Catch::Contains("100%"));
  CHECK_THAT(md, Catch::Contains("uniform (4,4; train.lr=0.001)") && Catch::Contains("uniform (4,4; train.lr=0.003)"));
  CHECK_THAT(md, Catch::Contains("Levels: one level, ") && !Catch::Contains("evenly spaced from"));
  CHECK_THAT(md, Catch::Contains("differ in train.lr besides seed and schedule"));
  auto tables = report_tables(rep);
  const Table& loss = tables.front().second;
  CHECK(loss.columns.at(loss.column("settings")) == "settings");
  CHECK(loss.columns.at(loss.column("parameters")) == "parameters");

  CHECK(report_count(999950) == "1.00M");
  CHECK(report_count(1746944) == "1.75M");
  CHECK(report_count(310400) == "310.4k");
  CHECK(report_count(152) == "152");
  CHECK(confidence_percent(0.95) == "95%");
  CHECK(confidence_percent(0.995) == "99.5%");
  CHECK(report_p(0.0431) == "0.043");
  CHECK(report_p(4.1e-5) == "4.1e-05");

  auto help = run_prism("report --help");
  INFO(help.output);
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("(=0.95)") && !Catch::Contains("0.9499"));
}

TEST_CASE("the report's throughput bench times uniform and the schedule in turns, in its own process",
          "[analysis][report][bench]") {
  BenchRequest t;
  t.model = "test-tiny";
  t.heads = "1x1,4x1";
  t.batch = 2;
  t.seq = 16;
  t.dtype = "fp32";
  t.threads = 1;
  t.steps = 6;  // the fewest with a 95% interval of the median
  t.warmup = 1;
  const int threads_before = torch::get_num_threads();
  const BenchResult b = run_bench_train(t);
  CHECK(torch::get_num_threads() == threads_before);  // restored
  CHECK(b.uniform_tokens_per_s > 0);
  CHECK(b.tokens_per_s > 0);
  CHECK(b.ratio > 0);
  CHECK(b.ratio_lo <= b.ratio);
  CHECK(b.ratio <= b.ratio_hi);
  CHECK_THAT(b.machine, Catch::Contains("1 intra-op threads"));
  CHECK_THAT(b.command, Catch::StartsWith("prism bench train --model test-tiny --vocab 0 --heads 1x1,4x1"));
  t.steps = 5;  // too few for the interval: NaN, not a made-up bound
  CHECK(std::isnan(run_bench_train(t).ratio_lo));
  t.heads = "3x2";
  CHECK_THROWS_AS(run_bench_train(t), Error);
}

TEST_CASE("the throughput bench's command reproduces its measurement", "[analysis][report]") {
  BenchRequest q;
  q.model = "cpu-128";
  q.vocab = 4096;
  q.heads = "1x2,4x4";
  q.batch = 16;
  q.seq = 128;
  q.dtype = "fp32";
  CHECK(bench_command(q, "/my dir/prism").rfind("'/my dir/prism' bench train", 0) == 0);
  CHECK(bench_command(q, "prism") ==
        "prism bench train --model cpu-128 --vocab 4096 --heads 1x2,4x4 --batch 16 --seq 128 --dtype fp32 "
        "--threads 1 --steps 20 --warmup 3 --clock cpu --compare none");
}

TEST_CASE("study report verdicts come from the numbers, in a fixed vocabulary", "[analysis][report][stats]") {
  CHECK(comparison_verdict(-0.02, 0.001, 0.9, 0.05) == "better");
  CHECK(comparison_verdict(+0.02, 0.001, 0.9, 0.05) == "worse");
  CHECK(comparison_verdict(+0.001, 0.6, 0.01, 0.05) == "equivalent");
  CHECK(comparison_verdict(+0.001, 0.6, 0.2, 0.05) == "unresolved");
  CHECK(comparison_verdict(+0.001, std::nan(""), std::nan(""), 0.05) == "unresolved");
  // A significant difference inside the margin is still a difference.
  CHECK(comparison_verdict(-0.001, 0.01, 0.001, 0.05) == "better");
  CHECK(paper_effect("gpt2-124m").nats == 0.0144);
  CHECK(paper_effect("prism-757m").nats == 0.0084);
  CHECK(paper_effect("cpu-128").nats == 0.01);
}

TEST_CASE("a key one arm leaves out is named by its default, not as unset", "[analysis][report]") {
  // The long-context study: rope arms set model.position, the learned arms leave it to the default.
  auto study = [](const std::string& other) {
    std::mt19937 rng(3);
    Study s;
    s.sweeps = {"made-up"};
    for (const uint64_t seed : {0u, 1u}) {
      StudyRun a = make_run({{4, 4}, seed, 0.0}, rng, "0.002");
      StudyRun b = make_run({{4, 4}, seed, 0.0}, rng, "0.002");
      b.experiment["model.position"] = other;
      s.runs.push_back(a);
      s.runs.push_back(b);
    }
    group_study(s, std::vector<RunShape>(s.runs.size(), RunShape{"made-up", 2, 64, 4}));
    return s;
  };
  const Study s = study("rope");
  REQUIRE(s.scales.size() == 1);
  CHECK(s.scales[0].varying == std::vector<std::string>{"model.position"});
  CHECK(s.runs[0].settings == "model.position=learned");
  CHECK(s.runs[1].settings == "model.position=rope");
  // An arm that names the default explicitly pools with one that leaves it out.
  const Study same = study("learned");
  CHECK(same.scales[0].varying.empty());
}
