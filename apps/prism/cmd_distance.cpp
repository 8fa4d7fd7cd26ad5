// prism distance CHECKPOINT... --data DIR [--baseline CHECKPOINT...]: attention
// distance per layer, head and query position on held-out tokens, and Delta D_l.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli.h"
#include "prism/analysis/distance_delta.h"
#include "prism/analysis/measure_distance.h"
#include "prism/analysis/result_store.h"
#include "prism/data/loader.h"
#include "prism/error.h"
#include "prism/store/run_reader.h"
#include "prism/store/checkpoint_reader.h"

namespace fs = std::filesystem;

namespace prism::cli {
namespace {

const char* kUsage =
    "CHECKPOINT... --data DIR [--baseline CHECKPOINT...] [options]\n\n"
    "Measures the attention distance d = sum_j p_ij (i - j) (tokens) of each model on the\n"
    "same held-out windows (the validation shards of DIR, read in order), per layer, head,\n"
    "batch and query-position bin, prints D_l per layer with its confidence interval over\n"
    "batches, and stores the profile in the run's run.h5 under /attention/heldout. With\n"
    "--baseline, also Delta D_l = D_l(Prism) - D_l(baseline) with intervals over batches\n"
    "(paired) and over seeds (Welch, with >= 2 runs per side), stored in each Prism run's\n"
    "run.h5 under /attention/delta. CHECKPOINT: a run directory (its newest checkpoint), a\n"
    "checkpoint directory or a model.safetensors file.\n\n"
    "examples:\n"
    "  prism distance runs/prism --data data/cache/austen\n"
    "  prism distance runs/prism-s0 runs/prism-s1 --baseline runs/uniform-s0 runs/uniform-s1 --data data/cache/austen";

struct Target {
  std::string checkpoint;
  std::string store;  // where its profile goes
  bool baseline = false;
};

std::vector<std::string> held_out_shards(const std::string& data) {
  if (fs::is_regular_file(data)) return {data};
  return find_shards(data, "val");
}

// Identifies the windows read: shard names and sizes (the loader's fingerprint) and the shape.
std::string tokens_id(const std::vector<std::string>& shards, const TokenLoader& loader, int64_t batches) {
  std::string names;
  for (const auto& s : shards) names += (names.empty() ? "" : ",") + fs::path(s).filename().string();
  return fmt::format("{}|{:016x}|{}x{}x{}", names, loader.state().fingerprint, batches, loader.options().batch,
                     loader.options().seq_len);
}

// The run's directory name, or the checkpoint path when it has no run directory.
std::string run_label(const std::string& checkpoint) {
  std::string store = find_run_store(checkpoint);
  return store.empty() ? checkpoint : fs::path(store).parent_path().filename().string();
}

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
        ("backend", po::value<std::string>()->default_value("auto"),
         "attention back end: auto (fused telemetry where available) | reference (explicit probabilities)")
        ("confidence", po::value<double>()->default_value(0.95), "confidence level of the intervals")
        ("out", po::value<std::string>(), "write to this HDF5 file instead of the run's run.h5 (one checkpoint)")
        ("threads", po::value<int>()->default_value(0), "intra-op threads (0: all cores)");
    po::positional_options_description pos;
    pos.add("checkpoint", -1);
    po::variables_map vm;
    if (!parse("distance", kUsage, o, pos, args, vm)) return 0;
    if (!vm.count("checkpoint"))
      throw Error("no checkpoint given", "prism distance", "pass a run directory, e.g. prism distance runs/demo --data DIR");
    if (!vm.count("data"))
      throw Error("no held-out data given", "--data", "pass a prepared corpus, e.g. --data data/cache/austen");
    const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
    const auto prism_ckpts = vm["checkpoint"].as<std::vector<std::string>>();
    const auto base_ckpts = vm.count("baseline") ? vm["baseline"].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (!out.empty() && prism_ckpts.size() + base_ckpts.size() > 1)
      throw Error("--out takes the results of one checkpoint", "--out",
                  "measure runs that live in run directories (their run.h5 gets the results), or one checkpoint with --out");
    const int64_t batch = vm["batch"].as<int64_t>(), bins = vm["bins"].as<int64_t>();
    const int64_t tokens = vm["tokens"].as<int64_t>();
    const double confidence = vm["confidence"].as<double>();
    if (batch < 1 || tokens < 1 || bins < 1)
      throw Error("--batch, --tokens and --bins must be positive", "prism distance", "pass positive counts");
    t_quantile(confidence, 1);  // rejects a bad level before any work
    const auto backend = attention::parse_backend(vm["backend"].as<std::string>());
    if (int t = vm["threads"].as<int>(); t > 0) torch::set_num_threads(t);
    const auto shards = held_out_shards(vm["data"].as<std::string>());

    // Every destination is found before any model runs.
    std::vector<Target> targets;
    for (const auto& c : prism_ckpts) targets.push_back({c, result_store_path(c, out, "prism distance"), false});
    for (const auto& c : base_ckpts) targets.push_back({c, result_store_path(c, out, "prism distance"), true});

    // ... and every run's schedule checked against its destination.
    for (const auto& t : targets) check_result_store(t.store, load_model(t.checkpoint).config.schedule.heads());

    std::vector<DistanceProfile> prism_side, base_side;
    std::vector<std::string> prism_stores;
    std::vector<int> d_model;
    for (const auto& t : targets) {
      LoadedModel lm = load_model(t.checkpoint);
      GPT& model = lm.model;
      model->attention_options().backend = backend;
      const auto& cfg = lm.config;
      const int64_t T = vm["seq-len"].as<int64_t>() > 0 ? vm["seq-len"].as<int64_t>()
                        : cfg.train.seq_len > 0       ? cfg.train.seq_len
                                                      : cfg.model.block_size;
      if (T > cfg.model.block_size)
        throw Error(fmt::format("window of {} tokens, the model's context is {}", T, cfg.model.block_size), "--seq-len",
                    "use --seq-len <= model.block_size");
      LoaderOptions lo;
      lo.shards = shards;
      lo.batch = batch;
      lo.seq_len = T;
      lo.shuffle = false;
      lo.vocab_size = cfg.model.vocab_size;
      TokenLoader loader(lo);
      if (loader.batches_per_epoch() < 1)
        throw Error(fmt::format("the held-out shards hold {} tokens, less than one batch of {} x {}", loader.tokens(),
                                batch, T),
                    vm["data"].as<std::string>(), "use a smaller --batch or --seq-len, or more validation data");
      const int64_t wanted = (tokens + batch * T - 1) / (batch * T);
      const int64_t batches = std::min(wanted, loader.batches_per_epoch());
      if (batches < wanted)
        std::cerr << fmt::format("note: the held-out shards hold {} batches of {} x {}; measuring on all of them\n",
                                 batches, batch, T);
      MeasureOptions mo;
      mo.batches = batches;
      mo.bins = bins;
      const std::string name = run_label(t.checkpoint);
      const bool tty = ::isatty(STDERR_FILENO);
      mo.progress = [&](int64_t done, int64_t total) {
        if (tty) std::cerr << fmt::format("\rdistance {}: batch {}/{}", name, done, total) << (done == total ? "\n" : "")
                           << std::flush;
      };
      DistanceProfile p = measure_distance(model, loader, mo);
      p.source = name;
      p.checkpoint = lm.path;
      p.step = lm.step;
      std::string data;
      for (const auto& s : shards) data += (data.empty() ? "" : ",") + s;
      p.data = data;
      p.tokens_id = tokens_id(shards, loader, batches);
      std::cout << fmt::format("{} (step {}, heads [{}], {}): D_l on {} held-out tokens ({} batches of {} x {}), "
                               "threads {}, back end {}\n",
                               name, lm.step, fmt::join(p.heads, ","), lm.path, p.tokens(), batches, batch, T,
                               torch::get_num_threads(), p.backend)
                << format_profile_table(p, cfg.model.d_model, confidence) << "\n";
      RunStore store = open_result_store(t.store, lm);
      store.write_group("attention/heldout", to_result_group(p));
      store.close();
      std::cout << fmt::format("profile -> {}:/attention/heldout\n\n", t.store);
      (t.baseline ? base_side : prism_side).push_back(std::move(p));
      if (!t.baseline) prism_stores.push_back(t.store);
      d_model.push_back(cfg.model.d_model);
    }
    if (base_side.empty()) return 0;
    DistanceDelta delta = distance_delta(prism_side, base_side, confidence);
    std::cout << "Delta D_l = D_l(Prism) - D_l(baseline), tokens\n" << format_delta_table(delta, d_model.front());
    for (const auto& s : prism_stores) {
      RunStore store = RunStore::open(s);
      store.write_group("attention/delta", to_result_group(delta));
      store.close();
      std::cout << fmt::format("delta -> {}:/attention/delta\n", s);
    }
    return 0;
  });
}

const Registration reg{{60, "distance", "attention distance per layer/head/position on held-out tokens; Delta D_l", run}};

}  // namespace
}  // namespace prism::cli
