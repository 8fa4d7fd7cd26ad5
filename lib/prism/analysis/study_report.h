#pragma once
// The study report (`prism report`): for any set of study sweeps, per scale, the
// uniform baseline against each Prism schedule, as the paper reports them:
//   - final validation loss: mean over seeds with its t-interval, the standard
//     error of one run's loss over its validation batches, the unigram baseline;
//   - Prism - uniform differences, paired by seed (same initial weights and data
//     order) with their t-interval and p-value; Welch's when fewer than 2 seeds
//     pair up; Holm-adjusted p-values over every difference in the report;
//   - steps and tokens to validation-loss milestones taken from the runs' own
//     range: evenly spaced levels from the uniform baseline's mean loss at
//     `milestone_start` of its steps down to the highest final loss of any run
//     (so every run reaches every level), each run's crossing interpolated
//     between its evaluations; the ratio to uniform paired by seed, with its
//     interval;
//   - zero-shot acc and acc_norm with their stderr over items (lm-evaluation-
//     harness's), and against uniform McNemar's exact test on the same items;
//   - training tokens/s against uniform, measured here by `prism bench train`
//     (throughput_bench.h) when asked (bench_steps), never from the runs' times;
//   - Delta D_l per layer (and its position-normalised form) with the schedule's
//     transition points, from the runs' held-out profiles, the seed interval
//     paired by seed, Holm-adjusted p-values over every layer and schedule.
// Attention distance is the project's own definition (the paper gives no
// formula); the report says so. The numbers become tables (CSV) and a markdown
// page; scripts/plot/study_report.py draws the figures the page links.
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "prism/analysis/distance_delta.h"
#include "prism/analysis/study_runs.h"
#include "prism/stats/sequential.h"
#include "prism/stats/stats.h"
#include "prism/store/table.h"

namespace prism {

struct ReportOptions {
  std::vector<std::string> sweeps;
  double confidence = 0.95;
  int milestones = 5;             // validation-loss levels per scale
  double milestone_start = 0.1;   // the first level: the uniform loss at this share of its steps
  std::string title;              // "" : "Study report"
  // Throughput: each schedule against uniform by `prism bench train` here
  // (throughput_bench.h), this many timed steps per arm; 0: not measured.
  int bench_steps = 0;
  int bench_warmup = 3;
  int bench_threads = 1;          // the CPU study trains one thread per run
  // The equivalence margin in nats (two one-sided tests of |Prism - uniform| < margin); NaN:
  // paper_effect(scale).nats of each scale (config/model_config.h).
  double margin = std::numeric_limits<double>::quiet_NaN();
  double power = 0.8;             // the power the minimum detectable effects are stated at
  // Seeds until resolved (prism report --sequential FIRST:STEP:CAP; stats/sequential.h):
  // first 0 reports none. Its margin is the report's.
  SequentialDesign sequential{0, 0, 0};
};

// A comparison's verdict from its numbers, in a fixed vocabulary: "better" or "worse" where
// the Holm-adjusted p of the difference is below alpha (lower loss is better), else
// "equivalent" where the Holm-adjusted TOST p is below alpha (within +-margin), else
// "unresolved" (the interval holds 0 and a difference the size of the margin).
std::string comparison_verdict(double mean, double p_holm, double tost_p_holm, double alpha);

struct LossSummary {
  int seeds = 0;
  double mean = 0, sd = 0;        // final validation loss over seeds (sd NaN below 2)
  Interval ci{};
  double val_se = 0;              // mean over runs of the standard error of each run's final loss (batches)
};

struct PairedDiff {
  std::string method;             // "paired" (by seed), "welch" (< 2 seeds pair up), "one pair" or "no pairs"
  int pairs = 0;                  // seeds paired
  int runs = 0, baseline_runs = 0;  // runs on each side (what Welch compares)
  double mean = 0;
  Interval ci{};
  double p = 0;                   // two-sided p-value (paired t-test or Welch's), nominal; NaN: none
  double p_holm = 0;              // Holm-adjusted over every loss difference of the report
  std::vector<std::pair<uint64_t, std::pair<double, double>>> seeds;  // seed -> (this, uniform)
  // Power and equivalence (paired differences only; NaN otherwise):
  double sd = 0;                  // sd of the paired differences
  double mde = 0, mde_holm = 0;   // detected with the report's power at alpha, and at alpha / m (Holm's first step)
  double margin = 0;              // the equivalence margin, nats
  double tost_p = 0, tost_p_holm = 0;  // two one-sided tests of |difference| < margin; Holm over the report's TOSTs
  std::string verdict;            // comparison_verdict()
};

struct MilestoneCell {
  double level = 0;
  int reached = 0, runs = 0;      // runs whose curve reaches the level
  double steps = 0, tokens = 0;   // mean over runs (NaN unless every run reaches it)
  Interval steps_ci{};
  // steps / the uniform baseline's steps, paired by seed: the geometric mean of
  // the per-seed ratios with the exponentiated t-interval of their logs (NaN
  // without pairs; no interval below 2). Nominal.
  int ratio_pairs = 0;
  double ratio = 0;
  Interval ratio_ci{};
};

struct TaskScore {
  std::string task;
  int seeds = 0;
  int64_t n = 0;                  // items
  double acc = 0, acc_stderr = 0, acc_norm = 0, acc_norm_stderr = 0;  // means over seeds; stderr: 1 SE over items
  double acc_norm_diff = 0;       // mean paired acc_norm - the uniform baseline's (NaN without pairs)
  // acc_norm against uniform on the same items: per seed pair, items only this
  // configuration got right and items only uniform got right, summed over the
  // seed pairs with per-item results; McNemar's exact test of the two counts.
  int test_pairs = 0;
  int64_t compared = 0;           // item comparisons (items x seed pairs)
  int64_t only_this = 0, only_baseline = 0;
  double p = 0, p_holm = 0;       // NaN without a test; Holm over every zero-shot test of the report
};

struct Throughput {
  bool measured = false;
  double uniform_tokens_per_s = 0, tokens_per_s = 0, ratio = 0;  // NaN unless measured
  Interval ratio_ci{};            // 95% distribution-free interval of the median ratio; NaN below 6 steps
  std::string dtype, machine, command;
  std::string note;               // why it was not measured ("" when it was)
};

// The validation loss of one bucket of query positions (/val/by_position at the trained
// context): its mean over seeds and, against the uniform baseline, the difference paired by seed.
struct PositionCell {
  int64_t lo = 0, hi = 0;         // positions [lo, hi)
  int seeds = 0;
  double loss = 0;
  Interval loss_ci{};
  int pairs = 0;
  double diff = 0;                // NaN without pairs
  Interval diff_ci{};             // NaN below 2 pairs
  double p = 0;                   // paired t-test, nominal (NaN below 2 pairs)
};

struct ConfigReport {
  const StudyConfig* config = nullptr;
  const StudyConfig* baseline = nullptr;  // its uniform configuration (nullptr: it is one, or none)
  LossSummary loss;
  std::optional<PairedDiff> diff;
  std::vector<MilestoneCell> milestones;
  std::vector<TaskScore> tasks;
  Throughput throughput;
  std::optional<DistanceDelta> delta;
  std::vector<int> transitions;   // layers l >= 1 where the head count changes
  std::string delta_note;         // why there is no Delta D_l
  std::vector<PositionCell> by_position;  // empty unless every run has one, on the same buckets
  // Holm-adjusted seed p-values per layer, over every layer of every schedule in
  // the report (raw and position-normalised distance: two families).
  std::vector<double> delta_p_holm, delta_p_holm_normalized;
};

// A scale's comparisons under the sequential design: its looks so far (every paired
// comparison has at least the look's pairs, seeds in ascending order) and the verdicts
// after each ("" unresolved); `next` is what the study does now.
struct SequentialState {
  int pairs = 0;                  // pairs of the last look reached
  std::vector<int> look_pairs;    // pairs at each look reached
  std::vector<const ConfigReport*> comparisons;
  std::vector<std::vector<std::string>> verdicts;  // [look][comparison]
  SequentialLevels levels;
  std::string next;               // "stop: ...", "add seeds ...", or "cap reached: ..."
};

struct ScaleReport {
  const StudyScale* scale = nullptr;
  std::optional<SequentialState> sequential;
  std::vector<double> levels;     // milestone levels, highest first
  std::string levels_rule;        // how they were taken, in words
  std::vector<std::string> tasks; // every task any run has
  std::vector<ConfigReport> configs;
};

struct StudyReport {
  ReportOptions options;
  Study study;
  std::vector<ScaleReport> scales;
};

// Throws prism::Error for bad options or sweep directories with nothing to report.
StudyReport build_study_report(const ReportOptions& options);
// The same from loaded runs (load_study, or runs a test makes); options.sweeps names them.
StudyReport build_study_report(Study study, const ReportOptions& options);

// A confidence level as a percentage, exactly: 0.95 -> "95%", 0.995 -> "99.5%".
std::string confidence_percent(double confidence);
// A count in the report's words: 999,950 -> "1.00M", 310,400 -> "310.4k", 152 -> "152".
std::string report_count(double v);
// A p-value: "0.043", "4.1e-05" below 0.001, "-" for NaN.
std::string report_p(double p);

// "gpt2-124m" -> "gpt2-124m", "12 x 96" -> "12x96", "3x3,6x3,12x6" -> "3x3-6x3-12x6": file-name parts.
std::string report_slug(const std::string& text);

// A figure's file name: "loss-<scale>.png", "delta-<scale>-<configuration>.png".
std::string report_figure(const std::string& kind, const StudyScale& s, const StudyConfig* c);

// The report's tables by file name: final_loss.csv, paired.csv, milestones.csv,
// zero_shot.csv, throughput.csv, delta.csv, curves.csv (every validation point,
// for the figures) and figures.csv (the figures report.md links: file, kind,
// scale, schedule, title).
std::vector<std::pair<std::string, Table>> report_tables(const StudyReport& report);

// report.md: per scale, the paper-shaped table and the detail tables.
std::string report_markdown(const StudyReport& report);

// Writes report.md, the tables (one CSV each) and report.h5 (every table as a
// group of column arrays, store/table_group.h) into `out_dir` (created), each atomically.
// Returns the files written.
std::vector<std::string> write_study_report(const StudyReport& report, const std::string& out_dir);

}  // namespace prism
