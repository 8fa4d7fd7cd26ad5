// The paper-shaped study in miniature, through the whole chain: the paper's
// 124M study file with a tiny model (study-tiny: 12 layers, 12 heads, the
// paper's schedule unchanged), the Austen shards, two seeds, on the CPU; then
// post-processing (distance, Delta D_l, the four zero-shot tasks on the small
// fixtures), with a failing step that is recorded without stopping the others
// and a rerun that does only what is left; then `prism report` and its figures,
// checked for every item of issue 13's point 3 and against the runs' own files.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <torch/torch.h>

#include "test_paths.h"
#include "analysis/analysis_support.h"
#include "prism/store/run_reader.h"
#include "prism/store/table.h"
#include "prism/sweep/plan.h"
#include "sweep/sweep_support.h"

using namespace prism::test;
namespace fs = std::filesystem;

namespace {

// The Austen corpus with its compact vocabulary: the prepared cache, or prepared here.
std::string austen_bpe(const TempDir& dir) {
  const std::string cached = source_path("data/cache/austen-bpe");
  if (fs::exists(cached + "/prepare.json")) return cached;
  const std::string out = dir.file("austen-bpe");
  // The recipe by its path: a recipe name is looked up from the repository root, and tests run elsewhere.
  auto r = run_prism(fmt::format("data prepare --recipe '{}' -o '{}' -q", source_path("data/recipes/austen-bpe.yaml"), out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return out;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string cell(const prism::CsvFile& t, size_t row, const std::string& column) {
  auto it = std::find(t.header.begin(), t.header.end(), column);
  REQUIRE(it != t.header.end());
  return t.rows.at(row)[static_cast<size_t>(it - t.header.begin())];
}

std::vector<size_t> rows_where(const prism::CsvFile& t, const std::string& column, const std::string& value) {
  std::vector<size_t> out;
  for (size_t r = 0; r < t.rows.size(); ++r)
    if (cell(t, r, column) == value) out.push_back(r);
  return out;
}

}  // namespace

TEST_CASE("a study end to end: sweep, post-processing with a failure and a resume, report with every item",
          "[analysis][study][report]") {
  TempDir dir("prism-study");
  const std::string data = austen_bpe(dir);
  const std::string out = dir.file("sweep");
  const std::string paper_schedule = "3x3,6x3,12x6";

  // 1. The paper's study file, shrunk to run here in seconds.
  auto r = run_prism(fmt::format(
      "sweep {} model=study-tiny data=austen-bpe attention=auto data.dir={} train.device=cpu train.dtype=fp32 "
      "train.batch_size=8 train.seq_len=32 train.tokens_per_step=256 train.max_steps=30 train.warmup_steps=3 "
      "train.eval_every=5 train.eval_tokens=2048 train.distance_every=0 train.checkpoint_every=0 train.log_every=10 "
      "'~sweep.grid.schedule.enumerate' 'sweep.grid.train.seed=[0,1]' sweep.jobs=2 sweep.threads=2 --out {}",
      source_path("experiments/study/gpt2-124m.yaml"), data, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(count(r.output, "done ") == 4);
  CHECK_THAT(r.output, Catch::Contains("unigram baseline 6.") && Catch::Contains("standard error of"));
  const std::string summary = read_file(out + "/summary.csv");
  CHECK_THAT(summary, Catch::Contains("final_val_loss_se,unigram_val_loss"));

  // 2. Post-processing, with one task file broken: that step fails on every trial,
  //    everything else is done and recorded.
  const std::string wino = dir.file("winogrande.jsonl");
  write_file(wino, "{\"sentence\": \"no blank here\", \"option1\": \"a\", \"option2\": \"b\", \"answer\": \"1\"}\n");
  const std::string post = dir.file("post.yaml");
  write_file(post, fmt::format("tasks:\n"
                               "  hellaswag: {{data: {0}/hellaswag.jsonl}}\n"
                               "  piqa: {{data: {0}/piqa.jsonl, labels: {0}/piqa-labels.lst}}\n"
                               "  arc_easy: {{data: {0}/arc_easy.jsonl}}\n"
                               "  winogrande: {{data: {1}}}\n"
                               "distance: {{tokens: 2048, batch: 4, bins: 4}}\n"
                               "device: cpu\n",
                               source_path("test/fixtures"), wino));
  r = run_prism(fmt::format("sweep {} --post {} --jobs 2 --threads 2", out, post));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("4 of 4 trials have steps left"));
  CHECK(count(r.output, "FAILED") == 4);
  CHECK_THAT(r.output, Catch::Contains("eval/winogrande: ") && Catch::Contains("malformed winogrande item"));
  auto rec = prism::read_csv(out + "/post.csv");
  CHECK(rec.header == std::vector<std::string>{"trial", "run_dir", "step", "status", "wall_s", "finished", "key",
                                               "message"});
  REQUIRE(rec.rows.size() == 4 * 5 + 2);  // distance and 4 tasks per trial, delta for the 2 Prism trials
  for (size_t i = 0; i < rec.rows.size(); ++i) {
    INFO(cell(rec, i, "trial") << " " << cell(rec, i, "step"));
    CHECK(cell(rec, i, "status") == (cell(rec, i, "step") == "eval/winogrande" ? "failed" : "done"));
  }
  // The Slurm form of the same work: one array task per trial with steps left.
  r = run_prism(fmt::format("sweep {} --post {} --launcher slurm --no-submit", out, post));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string array = read_file(out + "/slurm/post-0.sh");
  CHECK_THAT(array, Catch::Contains("#SBATCH --array=0-3") &&
                        Catch::Contains("--post") && Catch::Contains("--task-index \"$SLURM_ARRAY_TASK_ID\""));
  CHECK_THAT(read_file(out + "/slurm/post-0-collect.sh"), Catch::Contains("--collect") && Catch::Contains("--mem=2G"));
  // Steps on a GPU ask for one (submitted from a machine without one, as a login node is); on the CPU they do not.
  // (The study file's trials ask for --gres=gpu:1 in sweep.slurm.extra, which post-processing inherits.)
  r = run_prism(fmt::format("sweep {} --post {} --launcher slurm --no-submit device=cuda 'slurm.extra=[]'", out, post));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("request no GPU") && Catch::Contains("--gres=gpu:1"));
  r = run_prism(fmt::format("sweep {} --post {} --launcher slurm --no-submit device=cuda", out, post));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(read_file(out + "/slurm/post-1.sh"), Catch::Contains("#SBATCH --gres=gpu:1\n"));
  CHECK_THAT(read_file(out + "/slurm/post-1-collect.sh"), !Catch::Contains("gres"));

  // 3. Fixed, rerun: only the failed step runs; the others keep their records.
  const std::string some_run = out + "/" + cell(rec, 0, "run_dir");
  const auto before = nlohmann::json::parse(read_file(some_run + "/post.json"));
  fs::copy_file(source_path("test/fixtures/winogrande.jsonl"), wino, fs::copy_options::overwrite_existing);
  r = run_prism(fmt::format("sweep {} --post {} --jobs 2 --threads 2", out, post));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("4 of 4 trials have steps left"));
  CHECK(count(r.output, "FAILED") == 0);
  const auto after = nlohmann::json::parse(read_file(some_run + "/post.json"));
  CHECK(after["steps"]["distance"] == before["steps"]["distance"]);
  CHECK(after["steps"]["eval/hellaswag"] == before["steps"]["eval/hellaswag"]);
  CHECK(after["steps"]["eval/winogrande"]["status"] == "done");
  CHECK_THAT(read_file(some_run + "/post.log"), Catch::Contains("post ") && Catch::Contains("eval/winogrande ..."));
  r = run_prism(fmt::format("sweep {} --post {} --jobs 2", out, post));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("0 of 4 trials have steps left"));

  // 4. The report: every item of point 3, laid out per scale.
  const std::string rep = dir.file("report");
  r = run_prism(fmt::format("report {} --out {} --milestones 3", out, rep));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string md = read_file(rep + "/report.md");
  INFO(md);
  for (const char* item :
       {"## study-tiny: 12 layers x 96", "val loss", "Val SE", "Δ vs uniform", "(paired, 2 seeds)", "Unigram baseline: 6.",
        "Validation-loss milestones", "HellaSwag acc_norm", "PIQA acc_norm", "ARC-Easy acc_norm",
        "WinoGrande acc_norm", "Training throughput", "Not measured", "Δ D_l per layer: " "3x3,6x3,12x6",
        "transition 3→6", "transition 6→12", "this definition is the project's own", "D_l/i",
        "![Validation loss, study-tiny](loss-study-tiny.png)", "delta-study-tiny-3x3-6x3-12x6.png"})
    CHECK_THAT(md, Catch::Contains(item));

  // Final loss: the mean of the runs' own final validation losses; the difference paired by seed,
  // its 95% interval with t(0.975, 1 df) = 12.7062.
  std::map<std::string, std::map<std::string, double>> final_val;  // schedule -> seed -> loss
  auto runs = prism::read_csv(out + "/summary.csv");
  for (size_t i = 0; i < runs.rows.size(); ++i) {
    prism::RunReader run(out + "/" + cell(runs, i, "run_dir"));
    final_val[cell(runs, i, "schedule")][cell(runs, i, "seed")] = run.val().back().loss;
    CHECK(run.val().back().loss_se > 0);
  }
  REQUIRE(final_val.size() == 2);
  auto loss = prism::read_csv(rep + "/final_loss.csv");
  REQUIRE(loss.rows.size() == 2);
  // report.h5 holds every CSV table, as h5py reads it: same columns, same cells.
  auto h5 = run_reference("report_h5_check.py", rep);
  INFO(h5.output);
  REQUIRE(h5.exit_code == 0);
  CHECK_THAT(h5.output, Catch::Contains("\"final_loss\": 2") && Catch::Contains("\"delta\": 12"));
  // Every comparison's interval, p, MDE, TOST and verdict recompute from the CSVs with scipy
  // (scripts/report-check.py, what a reader runs on a committed report).
  auto recheck = run(fmt::format("'{}' '{}' '{}'", PRISM_PYTHON, source_path("scripts/report-check.py"), rep));
  INFO(recheck.output);
  CHECK(recheck.exit_code == 0);
  CHECK_THAT(recheck.output, Catch::Contains("ok: 1 rows"));
  CHECK(cell(loss, 0, "schedule") == "uniform");
  CHECK(cell(loss, 1, "schedule") == paper_schedule);
  const auto& u = final_val["uniform"];
  const auto& p = final_val[paper_schedule];
  CHECK(std::stod(cell(loss, 0, "val_loss_mean")) == Approx((u.at("0") + u.at("1")) / 2).epsilon(1e-12));
  const double d0 = p.at("0") - u.at("0"), d1 = p.at("1") - u.at("1");
  CHECK(std::stod(cell(loss, 1, "diff_vs_uniform")) == Approx((d0 + d1) / 2).epsilon(1e-9));
  const double half = 12.7062047362 * std::abs(d0 - d1) / std::sqrt(2.0) / std::sqrt(2.0);
  CHECK(std::stod(cell(loss, 1, "diff_ci_hi")) - std::stod(cell(loss, 1, "diff_ci_lo")) == Approx(2 * half).epsilon(1e-6));
  CHECK(cell(loss, 1, "diff_method") == "paired");
  CHECK(std::stod(cell(loss, 0, "unigram_val_loss")) > 6.0);
  CHECK(std::stod(cell(loss, 0, "val_loss_se_run")) > 0);
  CHECK(prism::read_csv(rep + "/paired.csv").rows.size() == 2);

  // Loss by query position (each run's /val/by_position/T32): buckets 0, 1, 2-3, ..., 16-31, the
  // mean over seeds, and the schedule's difference from uniform paired by seed.
  CHECK_THAT(md, Catch::Contains("### Validation loss by query position") && Catch::Contains("| 16-31 |"));
  std::map<std::string, std::map<std::string, std::vector<double>>> by_pos;  // schedule -> seed -> bucket losses
  for (size_t i = 0; i < runs.rows.size(); ++i) {
    prism::RunReader run(out + "/" + cell(runs, i, "run_dir"));
    by_pos[cell(runs, i, "schedule")][cell(runs, i, "seed")] =
        run.read_group("val/by_position/T32").reals("loss", run.path());
  }
  auto pos = prism::read_csv(rep + "/loss_by_position.csv");
  REQUIRE(pos.rows.size() == 2 * 6);
  CHECK(cell(pos, 6, "schedule") == paper_schedule);
  CHECK(cell(pos, 11, "position_lo") == "16");
  CHECK(cell(pos, 11, "position_hi") == "31");
  for (size_t b = 0; b < 6; ++b) {
    const auto& up = by_pos["uniform"];
    const auto& pp = by_pos[paper_schedule];
    CHECK(std::stod(cell(pos, b, "loss")) == Approx((up.at("0")[b] + up.at("1")[b]) / 2).epsilon(1e-9));
    const double e0 = pp.at("0")[b] - up.at("0")[b], e1 = pp.at("1")[b] - up.at("1")[b];
    CHECK(std::stod(cell(pos, 6 + b, "diff_vs_uniform")) == Approx((e0 + e1) / 2).epsilon(1e-9));
    CHECK(cell(pos, 6 + b, "diff_pairs") == "2");
    CHECK(cell(pos, b, "diff_vs_uniform").empty());  // uniform has no difference
  }

  // Milestones: 3 levels from the uniform curve at 10% of its steps down to the highest final loss of a run;
  // each crossing lies where the run's own curve passes the level.
  auto miles = prism::read_csv(rep + "/milestones.csv");
  REQUIRE(miles.rows.size() == 2 * 3);
  const double worst = std::max({u.at("0"), u.at("1"), p.at("0"), p.at("1")});
  CHECK(std::stod(cell(miles, 2, "level")) == Approx(worst).epsilon(1e-12));
  CHECK(std::stod(cell(miles, 0, "level")) > std::stod(cell(miles, 1, "level")));
  for (size_t i = 0; i < miles.rows.size(); ++i) {
    CHECK(cell(miles, i, "reached") == "2");
    const double steps = std::stod(cell(miles, i, "steps"));
    CHECK(steps > 0);
    CHECK(steps <= 30);
  }
  CHECK(cell(miles, 0, "steps_ratio_to_uniform").empty());  // uniform's own row
  CHECK(cell(miles, 3, "ratio_pairs") == "2");                // the schedule's, paired by seed
  CHECK(std::stod(cell(miles, 3, "steps_ratio_to_uniform")) > 0);

  // Zero-shot: four tasks per configuration, acc and acc_norm with stderr, the items of the fixtures.
  auto zero = prism::read_csv(rep + "/zero_shot.csv");
  REQUIRE(zero.rows.size() == 2 * 4);
  for (size_t i = 0; i < zero.rows.size(); ++i) {
    CHECK(cell(zero, i, "seeds") == "2");
    CHECK(!cell(zero, i, "acc").empty());
    CHECK(!cell(zero, i, "acc_norm_stderr").empty());
  }
  CHECK(cell(zero, rows_where(zero, "task", "hellaswag").front(), "n") == "5");

  // Zero-shot against uniform: McNemar on the same items, per seed pair.
  for (size_t i : rows_where(zero, "schedule", paper_schedule)) {
    CHECK(cell(zero, i, "seed_pairs_tested") == "2");
    CHECK(cell(zero, i, "item_comparisons") == std::to_string(2 * std::stoi(cell(zero, i, "n"))));
    CHECK(!cell(zero, i, "mcnemar_p").empty());
  }

  // Throughput: not from the runs' own times; measured only when asked (--bench-steps).
  auto thr = prism::read_csv(rep + "/throughput.csv");
  REQUIRE(thr.rows.size() == 1);
  CHECK(cell(thr, 0, "measured") == "0");
  CHECK(cell(thr, 0, "ratio_to_uniform").empty());

  // Parameters: the checkpoints' count, with the data's 4096-id vocabulary (not GPT-2's 50,257).
  auto count = run(fmt::format("'{}' -c \"import sys, glob, safetensors.numpy as s; "
                               "f = sorted(glob.glob(sys.argv[1] + '/*/checkpoints/step_*/model.safetensors'))[-1]; "
                               "print(sum(v.size for v in s.load_file(f).values()))\" {}",
                               PRISM_PYTHON, out));
  INFO(count.output);
  REQUIRE(count.exit_code == 0);
  CHECK(cell(loss, 0, "parameters") == count.output.substr(0, count.output.find('\n')));

  // Delta D_l's seed intervals, paired by seed, against a recomputation from the runs' run.h5 files.
  auto ref = run_reference("delta_seed_reference.py", fmt::format("{} {}", out, rep));
  INFO(ref.output);
  CHECK(ref.exit_code == 0);

  // Delta D_l: 12 layers, seeds pooled, the transitions at layers 3 and 6, the normalised form beside it.
  auto delta = prism::read_csv(rep + "/delta.csv");
  REQUIRE(delta.rows.size() == 12);
  for (size_t l = 0; l < 12; ++l) {
    CHECK(cell(delta, l, "transition") == (l == 3 || l == 6 ? "1" : "0"));
    CHECK(cell(delta, l, "prism_runs") == "2");
    CHECK(!cell(delta, l, "seed_ci_lo").empty());
    CHECK(cell(delta, l, "seed_method") == "paired");
    CHECK(!cell(delta, l, "seed_ci_normalized_lo").empty());
    CHECK(!cell(delta, l, "delta_normalized").empty());
    CHECK(std::stod(cell(delta, l, "delta")) ==
          Approx(std::stod(cell(delta, l, "prism")) - std::stod(cell(delta, l, "uniform"))).margin(1e-9));
  }
  CHECK(cell(delta, 0, "head_dim") == "32");
  CHECK(cell(delta, 11, "head_dim") == "8");

  // 5. The figures the report links.
  r = run(fmt::format("'{}' '{}/scripts/plot/study_report.py' {}", PRISM_PYTHON, PRISM_SOURCE_DIR, rep));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto img = run_reference("check_image.py", fmt::format("{0}/loss-study-tiny.png {0}/delta-study-tiny-3x3-6x3-12x6.png", rep));
  INFO(img.output);
  REQUIRE(img.exit_code == 0);
  for (const auto& i : nlohmann::json::parse(img.output)) {
    CHECK(i["format"] == "png");
    CHECK(i["bytes"].get<int>() > 15000);
  }

  // 6. The same sweep as an older prism wrote it (no /val/loss_se, no unigram_val_loss
  //    attribute, no position-normalised distance): the report still has every table,
  //    the unigram baseline comes from the data's prepare.json, the SE cells are empty.
  const std::string old = dir.file("old-sweep");
  fs::copy(out, old, fs::copy_options::recursive);
  std::string old_runs;
  for (size_t i = 0; i < runs.rows.size(); ++i) old_runs += " " + old + "/" + cell(runs, i, "run_dir") + "/run.h5";
  auto py = run_reference("make_old_run.py", old_runs);
  INFO(py.output);
  REQUIRE(py.exit_code == 0);
  const std::string old_rep = dir.file("old-report");
  r = run_prism(fmt::format("report {} --out {} --milestones 3", old, old_rep));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto old_loss = prism::read_csv(old_rep + "/final_loss.csv");
  REQUIRE(old_loss.rows.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(cell(old_loss, i, "val_loss_se_run").empty());
    CHECK(std::stod(cell(old_loss, i, "unigram_val_loss")) == Approx(std::stod(cell(loss, i, "unigram_val_loss"))));
    CHECK(cell(old_loss, i, "val_loss_mean") == cell(loss, i, "val_loss_mean"));
  }
  const std::string old_md = read_file(old_rep + "/report.md");
  CHECK_THAT(old_md, Catch::Contains("Unigram baseline: 6.") && Catch::Contains("HellaSwag acc_norm"));
  auto old_delta = prism::read_csv(old_rep + "/delta.csv");
  REQUIRE(old_delta.rows.size() == 12);
  for (size_t l = 0; l < 12; ++l) {
    CHECK(cell(old_delta, l, "delta") == cell(delta, l, "delta"));
    CHECK(cell(old_delta, l, "delta_normalized").empty());
  }
  r = run(fmt::format("'{}' '{}/scripts/plot/study_report.py' {}", PRISM_PYTHON, PRISM_SOURCE_DIR, old_rep));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(old_rep + "/loss-study-tiny.png"));
  // prism export and the sweep's own index read them the same way.
  auto exported = run_prism(fmt::format("export {} --what summary -o {}", old, dir.file("old-summary.csv")));
  INFO(exported.output);
  REQUIRE(exported.exit_code == 0);
  auto old_summary = prism::read_csv(dir.file("old-summary.csv"));
  REQUIRE(old_summary.rows.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(cell(old_summary, i, "val_loss_se").empty());
    CHECK(std::stod(cell(old_summary, i, "unigram_val_loss")) > 6.0);
  }
  r = run_prism(fmt::format("sweep {} --collect", old));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("unigram baseline 6."));
  CHECK_THAT(r.output, !Catch::Contains("standard error of"));
}

TEST_CASE("post-processing refuses a bad request before anything runs", "[analysis][study]") {
  TempDir dir("prism-study");
  // A sweep directory as prism sweep makes it (nothing trained: no request gets that far).
  write_file(dir.file("s.yaml"), tiny_base(dir.file("no-data")) + "sweep:\n  grid:\n    schedule.heads: [[2, 2, 4, 4]]\n");
  const std::string sweep = dir.file("sweep");
  fs::create_directories(sweep);
  write_file(sweep + "/sweep.yaml", prism::plan_to_yaml(prism::plan_sweep(dir.file("s.yaml"))));
  const std::string fixtures = source_path("test/fixtures");
  struct Case {
    std::string post, expected;
  };
  const std::vector<Case> cases = {
      {fmt::format("tasks:\n  piqa: {{data: {}/missing.jsonl}}\n", dir.path()), "missing: piqa file"},
      {fmt::format("tasks:\n  mmlu: {{data: {}/piqa.jsonl}}\n", fixtures), "unknown task 'mmlu'"},
      {"distance: {tokens: 64}\nbackend: fast\n", "backend"},
      {"distance: {tokens: 64, batchsize: 4}\n", "distance.batchsize"},
      {"distance: false\n", "asks for nothing"},
  };
  for (const auto& c : cases) {
    write_file(dir.file("post.yaml"), c.post);
    auto r = run_prism(fmt::format("sweep {} --post {}", sweep, dir.file("post.yaml")));
    INFO(c.post << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.expected));
    CHECK_FALSE(fs::exists(sweep + "/post.csv"));
  }
  write_file(dir.file("post.yaml"), "distance: {tokens: 64}\n");
  auto r = run_prism(fmt::format("sweep {} --post {}", dir.file("s.yaml"), dir.file("post.yaml")));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--post post-processes a sweep directory"));
  r = run_prism(fmt::format("sweep {} --post {}", dir.path(), dir.file("post.yaml")));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("not a sweep directory"));
  if (!torch::cuda::is_available()) {
    r = run_prism(fmt::format("sweep {} --post {} device=cuda", sweep, dir.file("post.yaml")));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--device") && Catch::Contains("cuda"));
  }
  // Nothing has trained: the table lists every trial as not ready, and nothing failed.
  r = run_prism(fmt::format("sweep {} --post {}", sweep, dir.file("post.yaml")));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("0 of 2 trials have steps left") && Catch::Contains("not ready") &&
                           Catch::Contains("2 trial(s) have not completed their full-budget run"));
}
