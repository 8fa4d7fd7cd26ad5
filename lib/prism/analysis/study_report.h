#pragma once
// The study report (`prism report`): for any set of study sweeps, per scale, the
// uniform baseline against each Prism schedule, as the paper reports them:
//   - final validation loss: mean over seeds with its t-interval, the standard
//     error of one run's loss over its validation batches, the unigram baseline;
//   - Prism - uniform differences, paired by seed (same initial weights and data
//     order) with their t-interval; Welch's interval when no seeds pair up;
//   - steps and tokens to validation-loss milestones taken from the runs' own
//     range: evenly spaced levels from the uniform baseline's mean loss at
//     `milestone_start` of its steps down to the highest final loss of any run
//     (so every run reaches every level), each run's crossing interpolated
//     between its evaluations;
//   - zero-shot acc and acc_norm with their stderr (lm-evaluation-harness's);
//   - training tokens/s against the uniform baseline, paired by seed;
//   - Delta D_l per layer (and its position-normalised form) with the schedule's
//     transition points, from the runs' held-out profiles (seeds pooled).
// Attention distance is the project's own definition (the paper gives no
// formula); the report says so. The numbers become tables (CSV) and a markdown
// page; scripts/plot/study_report.py draws the figures the page links.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "prism/analysis/distance_delta.h"
#include "prism/analysis/stats.h"
#include "prism/analysis/study_runs.h"
#include "prism/analysis/table.h"

namespace prism {

struct ReportOptions {
  std::vector<std::string> sweeps;
  double confidence = 0.95;
  int milestones = 5;             // validation-loss levels per scale
  double milestone_start = 0.1;   // the first level: the uniform loss at this share of its steps
  std::string title;              // "" : "Study report"
};

struct LossSummary {
  int seeds = 0;
  double mean = 0, sd = 0;        // final validation loss over seeds (sd NaN below 2)
  Interval ci{};
  double val_se = 0;              // mean over runs of the standard error of each run's final loss (batches)
};

struct PairedDiff {
  std::string method;             // "paired" (by seed), "welch" (no seeds pair up) or "one pair"
  int pairs = 0;
  double mean = 0;
  Interval ci{};
  std::vector<std::pair<uint64_t, std::pair<double, double>>> seeds;  // seed -> (this, uniform)
};

struct MilestoneCell {
  double level = 0;
  int reached = 0, runs = 0;      // runs whose curve reaches the level
  double steps = 0, tokens = 0;   // mean over runs (NaN unless every run reaches it)
  Interval steps_ci{};
  double ratio = 0;               // steps / the uniform baseline's steps (NaN without one)
};

struct TaskScore {
  std::string task;
  int seeds = 0;
  int64_t n = 0;                  // items
  double acc = 0, acc_stderr = 0, acc_norm = 0, acc_norm_stderr = 0;  // means over seeds; stderr over items
  double acc_norm_diff = 0;       // mean paired acc_norm - the uniform baseline's (NaN without pairs)
};

struct Throughput {
  int seeds = 0;
  double tokens_per_s = 0;        // mean over runs
  int pairs = 0;
  double ratio = 0;               // mean over seeds of this / uniform tokens/s (ratio of means without pairs)
  Interval ratio_ci{};
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
};

struct ScaleReport {
  const StudyScale* scale = nullptr;
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

// Writes report.md and the tables into `out_dir` (created), each atomically.
// Returns the files written.
std::vector<std::string> write_study_report(const StudyReport& report, const std::string& out_dir);

}  // namespace prism
