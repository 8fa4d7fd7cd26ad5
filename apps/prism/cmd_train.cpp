// prism train CONFIG [key=value ...] | prism train --resume RUN_DIR [key=value ...]
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/train/distributed.h"
#include "prism/train/trainer.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "CONFIG [key=value ...]        start a run\n"
    "       prism train --resume RUN_DIR [key=value ...]  continue a run from its newest checkpoint\n\n"
    "Trains a Prism or uniform GPT on prepared token shards (data.dir) and writes, in the\n"
    "run directory: config.yaml (resolved), run.h5 (loss curves, validation, attention\n"
    "distance; readable while the run goes) and checkpoints/ (safetensors + trainer state).\n"
    "Ctrl-C (SIGINT) or SIGTERM finishes the step, saves a checkpoint and exits; --resume\n"
    "then continues exactly where it stopped.\n\n"
    "Data parallel (one process per core group or GPU; the same results as one process with\n"
    "the same train.tokens_per_step): launch with torchrun or srun, e.g.\n"
    "  torchrun --no-python --nproc-per-node 2 prism train CONFIG\n"
    "Rank 0 writes the run; PRISM_DIST_TIMEOUT (seconds, default 300) bounds waits on other ranks.\n\n"
    "examples:\n"
    "  prism train experiments/cpu-prism.yaml --out runs/prism-demo\n"
    "  prism train experiments/cpu-prism.yaml schedule=uniform --out runs/uniform-demo\n"
    "  prism train --resume runs/prism-demo train.max_steps=2000";

int run(const std::vector<std::string>& args) {
  return guarded("train", [&]() -> int {
    po::options_description opts("Options");
    opts.add_options()
        ("config", po::value<std::string>(), "YAML config file")
        ("set", po::value<std::vector<std::string>>()->composing(), "key=value overrides (positional)")
        ("out,o", po::value<std::string>(), "run directory (default: runs/<config name>)")
        ("resume", po::value<std::string>(), "continue the run in this directory")
        ("force", po::bool_switch(), "replace an existing run in the output directory")
        ("print-config", po::bool_switch(), "print the resolved config and exit");
    po::positional_options_description pos;
    pos.add("config", 1).add("set", -1);
    std::vector<std::string> a = args;
    po::variables_map vm;
    // With --resume, every positional argument is an override.
    bool resuming = std::find(args.begin(), args.end(), "--resume") != args.end();
    po::positional_options_description pos_resume;
    pos_resume.add("set", -1);
    if (!parse("train", kUsage, opts, resuming ? pos_resume : pos, a, vm)) return 0;
    std::vector<std::string> overrides;
    if (vm.count("set")) overrides = vm["set"].as<std::vector<std::string>>();

    TrainOptions to;
    Config cfg;
    if (vm.count("resume")) {
      to.run_dir = vm["resume"].as<std::string>();
      to.resume = true;
      cfg = load_run_config(to.run_dir, overrides);
    } else {
      if (!vm.count("config"))
        throw Error("no config given", "prism train", "pass a YAML config, e.g. prism train experiments/cpu-prism.yaml --out runs/prism-demo");
      const std::string path = vm["config"].as<std::string>();
      cfg = compose_run_config(path, overrides);
      to.run_dir = vm.count("out") ? vm["out"].as<std::string>()
                                   : (std::filesystem::path("runs") / std::filesystem::path(path).stem()).string();
      to.force = vm["force"].as<bool>();
    }
    // Under a launcher, warnings are rank 0's to print (the others would repeat them).
    const bool root = read_distributed_env().rank == 0;
    for (const auto& w : cfg.schedule_warnings)
      if (root) std::cerr << "warning: schedule " << w.describe() << "\n";
    if (vm["print-config"].as<bool>()) {
      std::cout << print_config(cfg);
      return 0;
    }
    auto summary = train(cfg, to);
    if (summary.status == "completed") return 0;
    if (summary.status == "interrupted") return 130;
    std::cerr << fmt::format("prism train: error: {}\n", summary.message);
    return 1;
  });
}

const Registration reg{{10, "train", "train a Prism or uniform model on token shards", run}};

}  // namespace
}  // namespace prism::cli
