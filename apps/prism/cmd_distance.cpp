// prism distance CHECKPOINT... --data DIR [--baseline CHECKPOINT...]: attention
// distance per layer, head and query position on held-out tokens, and Delta D_l.
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "cli.h"
#include "trained_model_options.h"
#include "prism/analysis/heldout_distance.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "CHECKPOINT... --data DIR [--baseline CHECKPOINT...] [options]\n\n"
    "Measures the attention distance d = sum_j p_ij (i - j) (tokens) of each model on the\n"
    "same held-out windows (the validation shards of DIR, read in order), per layer, head,\n"
    "batch and query-position bin, prints D_l per layer with its confidence interval over\n"
    "batches, and stores the profile in the run's run.h5 under /attention/heldout. With\n"
    "--baseline, also Delta D_l = D_l(Prism) - D_l(baseline) with intervals over batches\n"
    "(paired: the precision for these models) and over seeds (paired by train.seed when >= 2\n"
    "seeds match, else Welch's with >= 2 runs per side: the evidence about the schedule),\n"
    "stored in each Prism run's run.h5 under /attention/delta. CHECKPOINT: a run directory (its newest checkpoint), a\n"
    "checkpoint directory or a model.safetensors file. The model runs on --device with\n"
    "--backend, whatever back end it trained with; on a GPU, auto takes the distance from\n"
    "the CUDA kernel's telemetry.\n\n"
    "examples:\n"
    "  prism distance runs/prism --data data/cache/austen\n"
    "  prism distance runs/prism-s0 runs/prism-s1 --baseline runs/uniform-s0 runs/uniform-s1 --data data/cache/austen\n"
    "  prism distance runs/prism --baseline runs/uniform --data data/cache/fineweb --device cuda --backend cuda";

int run(const std::vector<std::string>& args) {
  return guarded("distance", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("checkpoint", po::value<std::vector<std::string>>()->multitoken(), "Prism (or any) runs to measure")
        ("baseline", po::value<std::vector<std::string>>()->multitoken(), "uniform baseline run(s): also Delta D_l")
        ("data", po::value<std::string>(), "prepared corpus directory (its validation shards) or one shard file")
        ("tokens", po::value<int64_t>()->default_value(65536), "held-out tokens to read (whole batches)")
        ("seq-len", po::value<int64_t>()->default_value(0), "window length T (0: the run's train.seq_len)")
        ("batch", po::value<int64_t>()->default_value(8), "sequences per batch (the unit of the batch intervals)")
        ("bins", po::value<int64_t>()->default_value(8), "query-position bins")
        ("confidence", po::value<double>()->default_value(0.95), "confidence level of the intervals")
        ("out", po::value<std::string>(), "write to this HDF5 file instead of the run's run.h5 (one checkpoint)");
    add_trained_model_options(o);
    po::positional_options_description pos;
    pos.add("checkpoint", -1);
    po::variables_map vm;
    if (!parse("distance", kUsage, o, pos, args, vm)) return 0;
    HeldOutRequest r;
    if (vm.count("checkpoint")) r.checkpoints = vm["checkpoint"].as<std::vector<std::string>>();
    if (vm.count("baseline")) r.baselines = vm["baseline"].as<std::vector<std::string>>();
    if (vm.count("data")) r.data = vm["data"].as<std::string>();
    if (vm.count("out")) r.out = vm["out"].as<std::string>();
    r.tokens = vm["tokens"].as<int64_t>();
    r.seq_len = vm["seq-len"].as<int64_t>();
    r.batch = vm["batch"].as<int64_t>();
    r.bins = vm["bins"].as<int64_t>();
    r.confidence = vm["confidence"].as<double>();
    r.placement = apply_trained_model_options(vm);
    r.print = [](const std::string& s) { std::cout << s; };
    r.note = [](const std::string& s) { std::cerr << s; };
    if (::isatty(STDERR_FILENO))
      r.progress = [](const std::string& name, int64_t done, int64_t total) {
        std::cerr << fmt::format("\rdistance {}: batch {}/{}", name, done, total) << (done == total ? "\n" : "")
                  << std::flush;
      };
    measure_heldout(r);
    return 0;
  });
}

const Registration reg{{60, "distance", "attention distance per layer/head/position on held-out tokens; Delta D_l", run}};

}  // namespace
}  // namespace prism::cli
