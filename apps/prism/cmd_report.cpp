// prism report SWEEP_DIR... --out DIR: the study report's numbers (markdown + CSV).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "prism/analysis/study_report.h"
#include "prism/error.h"
#include "prism/sweep/plan.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "SWEEP_DIR... [--out DIR] [options]\n\n"
    "The study report of any set of study sweeps: per scale (model shape), the uniform\n"
    "baseline against each schedule, from every trial that completed its full budget.\n"
    "Runs pool as one configuration only when their resolved configs agree on every key\n"
    "but the seed and the schedule; where a scale's runs differ in other keys, each\n"
    "configuration is named with its values and compared with the uniform runs of the\n"
    "same values. Reports: final validation loss (mean and interval over seeds, the\n"
    "validation set's standard error, the unigram baseline), Prism - uniform differences\n"
    "paired by seed with p-values and Holm's adjustment over the report, steps and tokens\n"
    "to validation-loss milestones with paired ratios, zero-shot acc/acc_norm with\n"
    "McNemar's test against uniform on the same items, Delta D_l per layer with paired seed\n"
    "intervals and the schedule's transition points, the parameter count from the\n"
    "checkpoints, for each comparison its minimum detectable effect at 80% power (and at\n"
    "Holm's first step), an equivalence test (TOST) against --margin and a verdict from a\n"
    "fixed vocabulary (better, worse, equivalent, unresolved); with --sequential, the\n"
    "verdicts of a seeds-until-resolved design at each look and what to train next; and\n"
    "with --bench-steps the tokens/s of each schedule against uniform,\n"
    "measured here as prism bench train measures it (steps taking turns). Writes\n"
    "report.md and one CSV per table (final_loss, paired, milestones, zero_shot,\n"
    "throughput, delta, curves, figures) into --out; the figures report.md links come\n"
    "from scripts/plot/study_report.py DIR, and scripts/study-report.sh does both (and the\n"
    "post-processing first). Zero-shot scores and held-out distances come from\n"
    "post-processing: prism sweep DIR --post POST.yaml. docs/analysis.md says how each\n"
    "number is made.\n\n"
    "examples:\n"
    "  prism report sweeps/study-124m sweeps/study-354m sweeps/study-757m --out reports/paper\n"
    "  prism report sweeps/cpu-study-128 sweeps/cpu-study-192 --out docs/results/cpu-study --bench-steps 20";

// --sequential FIRST:STEP:CAP, else the first sweep.sequential of the sweeps' sweep.yaml; {0,0,0}: none.
SequentialDesign sequential_design(const std::string& text, const std::vector<std::string>& sweeps) {
  SequentialDesign d{0, 0, 0};
  if (!text.empty()) {
    char c1 = 0, c2 = 0, rest = 0;
    std::istringstream in(text);
    if (!(in >> d.first >> c1 >> d.step >> c2 >> d.cap) || c1 != ':' || c2 != ':' || (in >> rest))
      throw Error(fmt::format("--sequential {} is not FIRST:STEP:CAP", text), "--sequential", "e.g. --sequential 3:3:21");
    d.check();
    return d;
  }
  for (const auto& dir : sweeps) {
    const auto yaml = std::filesystem::path(dir) / "sweep.yaml";
    if (!std::filesystem::exists(yaml)) continue;
    const SequentialSettings q = plan_from_yaml(yaml.string()).settings.sequential;
    if (q.first > 0) return SequentialDesign{q.first, q.step, q.cap};
  }
  return d;
}

int run(const std::vector<std::string>& args) {
  return guarded("report", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("sweep", po::value<std::vector<std::string>>()->multitoken(), "study sweep directories")
        ("out,o", po::value<std::string>()->default_value("report"), "the report's directory")
        ("confidence", po::value<double>()->default_value(0.95, "0.95"), "confidence level of every interval")
        ("milestones", po::value<int>()->default_value(5), "validation-loss levels per scale")
        ("milestone-start", po::value<double>()->default_value(0.1, "0.1"),
         "the highest level: the uniform loss at this share of its steps")
        ("title", po::value<std::string>()->default_value(""), "the report's title (default: Study report)")
        ("bench-steps", po::value<int>()->default_value(0),
         "measure each schedule's training tokens/s against uniform here as prism bench train does, this many timed "
         "steps per arm (0: not measured)")
        ("bench-warmup", po::value<int>()->default_value(3), "untimed warm-up steps per arm of each bench")
        ("bench-threads", po::value<int>()->default_value(1), "intra-op threads of each bench")
        ("margin", po::value<double>(),
         "equivalence margin in nats for every comparison (default per scale: the paper's effect, gpt2-124m "
         "0.0144, gpt2-354m and prism-757m 0.0084; 0.01 for other models)")
        ("power", po::value<double>()->default_value(0.8, "0.8"), "the power the minimum detectable effects are stated at")
        ("sequential", po::value<std::string>(),
         "FIRST:STEP:CAP: seeds until resolved. Look at the verdicts after FIRST seed pairs, then every STEP more up "
         "to CAP, each look at one level that keeps a false verdict at any look within 0.05 (sequential.csv, and what "
         "to train next). Default: the sweeps' sweep.sequential, if any names one");
    po::positional_options_description pos;
    pos.add("sweep", -1);
    po::variables_map vm;
    if (!parse("report", kUsage, o, pos, args, vm)) return 0;
    ReportOptions r;
    if (vm.count("sweep")) r.sweeps = vm["sweep"].as<std::vector<std::string>>();
    r.confidence = vm["confidence"].as<double>();
    r.milestones = vm["milestones"].as<int>();
    r.milestone_start = vm["milestone-start"].as<double>();
    r.title = vm["title"].as<std::string>();
    r.bench_steps = vm["bench-steps"].as<int>();
    r.bench_warmup = vm["bench-warmup"].as<int>();
    r.bench_threads = vm["bench-threads"].as<int>();
    if (vm.count("margin")) {
      r.margin = vm["margin"].as<double>();
      if (!(r.margin > 0)) throw Error("--margin must be positive (nats)", "--margin", "e.g. --margin 0.01");
    }
    r.power = vm["power"].as<double>();
    if (!(r.power > 0 && r.power < 1)) throw Error("--power must lie strictly between 0 and 1", "--power", "e.g. --power 0.8");
    r.sequential = sequential_design(vm.count("sequential") ? vm["sequential"].as<std::string>() : "", r.sweeps);
    const StudyReport report = build_study_report(r);
    for (const auto& n : report.study.notes) std::cerr << "note: " << n << "\n";
    const std::string out = vm["out"].as<std::string>();
    const auto files = write_study_report(report, out);
    std::cout << fmt::format("report: {} scale(s), {} run(s) -> {}/report.md and {} tables\n", report.scales.size(),
                             report.study.runs.size(), out, files.size() - 1);
    std::cout << fmt::format("figures: .venv/bin/python scripts/plot/study_report.py {}\n", out);
    for (const auto& sc : report.scales)
      if (sc.sequential) std::cout << fmt::format("sequential, {}: {}\n", sc.scale->label, sc.sequential->next);
    return 0;
  });
}

const Registration reg{{75, "report", "the study report: loss, milestones, zero-shot, throughput, Delta D_l (md + CSV)", run}};

}  // namespace
}  // namespace prism::cli
