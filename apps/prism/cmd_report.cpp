// prism report SWEEP_DIR... --out DIR: the study report's numbers (markdown + CSV).
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "prism/analysis/study_report.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "SWEEP_DIR... [--out DIR] [options]\n\n"
    "The study report of any set of study sweeps: per scale (model shape), the uniform\n"
    "baseline against each schedule, from every trial that completed its full budget:\n"
    "final validation loss (mean and interval over seeds, the validation set's standard\n"
    "error, the unigram baseline), Prism - uniform differences paired by seed, steps and\n"
    "tokens to validation-loss milestones taken from the runs' own range, zero-shot\n"
    "acc/acc_norm with stderr, tokens/s against uniform, and Delta D_l per layer with the\n"
    "schedule's transition points. Writes report.md and one CSV per table (final_loss,\n"
    "paired, milestones, zero_shot, throughput, delta, curves, figures) into --out; the\n"
    "figures report.md links come from scripts/plot/study_report.py DIR, and\n"
    "scripts/study-report.sh does both (and the post-processing first). Zero-shot scores\n"
    "and held-out distances come from post-processing: prism sweep DIR --post POST.yaml.\n\n"
    "examples:\n"
    "  prism report sweeps/study-124m sweeps/study-354m sweeps/study-757m --out reports/paper\n"
    "  prism report sweeps/cpu-study-128 sweeps/cpu-study-192 sweeps/cpu-study-256 --out docs/results/cpu-study";

int run(const std::vector<std::string>& args) {
  return guarded("report", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("sweep", po::value<std::vector<std::string>>()->multitoken(), "study sweep directories")
        ("out,o", po::value<std::string>()->default_value("report"), "the report's directory")
        ("confidence", po::value<double>()->default_value(0.95), "confidence level of every interval")
        ("milestones", po::value<int>()->default_value(5), "validation-loss levels per scale")
        ("milestone-start", po::value<double>()->default_value(0.1),
         "the highest level: the uniform loss at this share of its steps")
        ("title", po::value<std::string>()->default_value(""), "the report's title (default: Study report)");
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
    const StudyReport report = build_study_report(r);
    for (const auto& n : report.study.notes) std::cerr << "note: " << n << "\n";
    const std::string out = vm["out"].as<std::string>();
    const auto files = write_study_report(report, out);
    std::cout << fmt::format("report: {} scale(s), {} run(s) -> {}/report.md and {} tables\n", report.scales.size(),
                             report.study.runs.size(), out, files.size() - 1);
    std::cout << fmt::format("figures: .venv/bin/python scripts/plot/study_report.py {}\n", out);
    return 0;
  });
}

const Registration reg{{75, "report", "the study report: loss, milestones, zero-shot, throughput, Delta D_l (md + CSV)", run}};

}  // namespace
}  // namespace prism::cli
