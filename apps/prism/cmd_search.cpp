// prism search SEARCH.yaml [key=value ...] | prism search --resume RUN_DIR: weight-sharing schedule search.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli.h"
#include "prism/analysis/search_evidence.h"
#include "prism/error.h"
#include "prism/search/search.h"
#include "prism/train/distributed.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "SEARCH.yaml [key=value ...] [options]   search a space of schedules with one shared model\n"
    "       prism search --resume RUN_DIR [key=value ...]  continue a search from its newest checkpoint\n"
    "       prism search --ground-truth SWEEP_DIR --searches RUN_DIR... [--halving SWEEP_DIR...] [--ranking shared]\n"
    "                    --report DIR\n"
    "                                                       judge searches against a grid trained from scratch\n\n"
    "A search file is a config (the shared model's model, data and training) with a `search:`\n"
    "section naming the space (search.space.heads: any of these counts in every layer;\n"
    "search.space.enumerate: the grid a sweep would train; search.space.schedules: a list),\n"
    "the method (spos: one schedule sampled per micro-batch; mixture: learned weights over\n"
    "the head counts of every layer, annealed to one count) and the ranking. Every layer's\n"
    "W_Q, W_K, W_V, W_O are d_model x d_model whatever its head count, so one set of weights\n"
    "runs every schedule of the space exactly. See experiments/search/ and docs/search.md.\n\n"
    "The model trains as `prism train` trains one (attention back ends, torchrun/srun data\n"
    "parallelism, Ctrl-C/SIGTERM/kill -9 then --resume, run.h5 readable while it runs, with\n"
    "the sampled schedules or architecture weights per step under /search); then the space is\n"
    "ranked by held-out loss under the shared weights (per-layer estimates and exact\n"
    "re-evaluation for large spaces), the best schedule under rules 1-3 is decoded by dynamic\n"
    "programming, guidelines 4-6 are reported, and the run directory gets ranking.csv and\n"
    "top.yaml, a sweep file that trains the top schedules from scratch (prism sweep).\n"
    "Plot how the choice evolved: python scripts/plot/search.py RUN_DIR.\n\n"
    "--ground-truth: the evidence (analysis/search_evidence.h): the ground truth's paired intervals,\n"
    "top band and spread; each search's Kendall tau against it and whether its pick, trained\n"
    "from scratch with the ground truth's seeds (a ground-truth trial, or one of --retrained),\n"
    "falls in the top band; compute against the grid's; random search and successive halving\n"
    "(--halving) at the same compute. Writes evidence.md and CSVs into --report. A search\n"
    "whose fine-tuning ran (prism sweep RUN_DIR/finetune.yaml --out RUN_DIR/finetune) is judged\n"
    "by that ranking and costed with it; --ranking shared judges the shared weights' instead.\n"
    "The targets each method is judged by are options (--target-tau, --target-band,\n"
    "--target-share; the ground truth's spread against --target-spread).\n\n"
    "examples:\n"
    "  prism search experiments/search/cpu-128.yaml --dry-run\n"
    "  prism search experiments/search/cpu-128.yaml --out runs/search-cpu\n"
    "  prism search experiments/search/cpu-128.yaml search.method=mixture --out runs/search-mix\n"
    "  prism search --resume runs/search-cpu\n"
    "  torchrun --no-python --nproc-per-node 2 prism search experiments/search/cpu-128.yaml";

// prism search --ground-truth ...: judge searches against a grid trained from scratch.
int run_evidence(const po::variables_map& vm) {
  EvidenceOptions eo;
  eo.ground_truth = vm["ground-truth"].as<std::string>();
  if (vm.count("searches")) eo.searches = vm["searches"].as<std::vector<std::string>>();
  if (vm.count("retrained")) eo.retrained = vm["retrained"].as<std::vector<std::string>>();
  if (vm.count("halving")) eo.halving = vm["halving"].as<std::vector<std::string>>();
  eo.pick = vm["pick"].as<std::string>();
  eo.ranking = vm["ranking"].as<std::string>();
  eo.targets = {vm["target-tau"].as<double>(), vm["target-band"].as<double>(), vm["target-share"].as<double>(),
                vm["target-spread"].as<double>()};
  const Evidence e = evaluate_search(eo);
  if (vm.count("report")) write_evidence(e, vm["report"].as<std::string>());
  std::cout << e.markdown;
  return 0;
}

int run(const std::vector<std::string>& args) {
  return guarded("search", [&]() -> int {
    po::options_description opts("Options");
    opts.add_options()
        ("search", po::value<std::string>(), "search file")
        ("set", po::value<std::vector<std::string>>()->composing(), "key=value overrides (positional)")
        ("out,o", po::value<std::string>(), "run directory (default: runs/<search name>)")
        ("resume", po::value<std::string>(), "continue the search in this directory")
        ("force", po::bool_switch(), "replace an existing run in the output directory")
        ("dry-run", po::bool_switch(), "print the space and the search's cost next to the grid's; run nothing")
        ("ground-truth", po::value<std::string>(), "evidence: the sweep directory of schedules trained from scratch")
        ("searches", po::value<std::vector<std::string>>()->multitoken(), "evidence: search run directories")
        ("retrained", po::value<std::vector<std::string>>()->multitoken(), "evidence: sweeps that trained picks outside the ground truth")
        ("halving", po::value<std::vector<std::string>>()->multitoken(), "evidence: successive-halving sweeps over the ground truth")
        ("pick", po::value<std::string>()->default_value("unconstrained"), "evidence: the pick judged: decoded | unconstrained")
        ("ranking", po::value<std::string>()->default_value("finetuned"),
         "evidence: the ranking judged: finetuned (RUN_DIR/finetune's, where it exists) | shared")
        ("report", po::value<std::string>(), "evidence: where evidence.md and the CSVs go")
        ("target-tau", po::value<double>()->default_value(0.6, "0.6"),
         "evidence target: a method's mean Kendall tau against the ground truth, at least")
        ("target-band", po::value<double>()->default_value(2.0 / 3.0, "0.667 (2 of 3)"),
         "evidence target: the share of a method's searches whose pick is in the top band, at least")
        ("target-share", po::value<double>()->default_value(0.25, "0.25"),
         "evidence target: search + fine-tune + retraining the pick, as a share of the grid's compute, at most")
        ("target-spread", po::value<double>()->default_value(5, "5"),
         "evidence target: the ground truth's best-to-worst spread over its paired half-width, at least");
    const bool resuming = std::find(args.begin(), args.end(), "--resume") != args.end();
    po::positional_options_description pos, pos_resume;
    pos.add("search", 1).add("set", -1);
    pos_resume.add("set", -1);
    po::variables_map vm;
    if (!parse("search", kUsage, opts, resuming ? pos_resume : pos, args, vm)) return 0;
    if (vm.count("ground-truth")) return run_evidence(vm);
    std::vector<std::string> overrides;
    if (vm.count("set")) overrides = vm["set"].as<std::vector<std::string>>();
    SearchOptions so;
    SearchPlan plan;
    if (vm.count("resume")) {
      so.run_dir = vm["resume"].as<std::string>();
      so.resume = true;
      plan = plan_from_run(so.run_dir, overrides);
    } else {
      if (!vm.count("search"))
        throw Error("no search file given", "prism search",
                    "pass one, e.g. prism search experiments/search/cpu-128.yaml --out runs/search-cpu");
      plan = plan_search(vm["search"].as<std::string>(), overrides);
      so.run_dir = vm.count("out") ? vm["out"].as<std::string>()
                                   : (std::filesystem::path("runs") / plan.settings.name).string();
      so.force = vm["force"].as<bool>();
    }
    if (vm["dry-run"].as<bool>()) {
      std::cout << format_search_dry_run(plan, so.run_dir);
      return 0;
    }
    const bool root = read_distributed_env().rank == 0;
    for (const auto& w : plan.config.schedule_warnings)
      if (root) std::cerr << "warning: schedule " << w.describe() << "\n";
    const SearchSummary summary = run_search(plan, so);
    if (summary.train.status == "completed") return 0;
    if (summary.train.status == "interrupted") return 130;
    std::cerr << fmt::format("prism search: error: {}\n", summary.train.message);
    return 1;
  });
}

const Registration reg{{25, "search", "find a schedule in one training run: a weight-sharing search over a space", run}};

}  // namespace
}  // namespace prism::cli
