#include "prism/analysis/heldout_distance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "prism/analysis/measure_distance.h"
#include "prism/error.h"
#include "prism/stats/stats.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/store/result_store.h"
#include "prism/store/run_reader.h"
#include "prism/train/loader.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

// One checkpoint to measure and the run store its profile goes to.
struct Target {
  std::string checkpoint;
  std::string store;
  bool baseline = false;
};

// A measured checkpoint, kept (without its weights) until everything is measured.
struct Measured {
  Target target;
  LoadedModel model;
  DistanceProfile profile;
};

void validate(const HeldOutRequest& r) {
  if (r.checkpoints.empty())
    throw Error("no checkpoint given", "prism distance", "pass a run directory, e.g. prism distance runs/demo --data DIR");
  if (r.data.empty())
    throw Error("no held-out data given", "--data", "pass a prepared corpus, e.g. --data data/cache/austen");
  if (!r.out.empty() && r.checkpoints.size() + r.baselines.size() > 1)
    throw Error("--out takes the results of one checkpoint", "--out",
                "measure runs that live in run directories (their run.h5 gets the results), or one checkpoint with --out");
  if (r.batch < 1 || r.tokens < 1 || r.bins < 1)
    throw Error("--batch, --tokens and --bins must be positive", "prism distance", "pass positive counts");
  t_quantile(r.confidence, 1);  // rejects a bad level before any work
}



// The run's directory name, or the checkpoint path when it has no run directory.
std::string run_label(const std::string& checkpoint) {
  std::string store = find_run_store(checkpoint);
  return store.empty() ? checkpoint : fs::path(store).parent_path().filename().string();
}

// The window length: --seq-len, else what the run trained on, else its context.
int64_t window_length(const HeldOutRequest& r, const Config& cfg) {
  const int64_t T = r.seq_len > 0 ? r.seq_len : cfg.train.seq_len > 0 ? cfg.train.seq_len : cfg.model.block_size;
  if (T > cfg.model.block_size)
    throw Error(fmt::format("window of {} tokens, the model's context is {}", T, cfg.model.block_size), "--seq-len",
                "use --seq-len <= model.block_size");
  return T;
}

TokenLoader held_out_loader(const HeldOutRequest& r, const std::vector<std::string>& shards, int64_t T,
                            int vocab_size) {
  LoaderOptions lo;
  lo.shards = shards;
  lo.batch = r.batch;
  lo.seq_len = T;
  lo.shuffle = false;
  lo.vocab_size = vocab_size;
  TokenLoader loader(lo);
  if (loader.batches_per_epoch() < 1)
    throw Error(fmt::format("the held-out shards hold {} tokens, less than one batch of {} x {}", loader.tokens(),
                            r.batch, T),
                r.data, "use a smaller --batch or --seq-len, or more validation data");
  return loader;
}

void say(const std::function<void(const std::string&)>& to, const std::string& text) {
  if (to) to(text);
}

Measured measure_one(const HeldOutRequest& r, const Target& t, const std::vector<std::string>& shards) {
  Measured m{t, load_model(t.checkpoint), {}};
  check_result_store(t.store, m.model.config.schedule.heads());
  const Config& cfg = m.model.config;
  const int64_t T = window_length(r, cfg);
  TokenLoader loader = held_out_loader(r, shards, T, cfg.model.vocab_size);
  const int64_t wanted = (r.tokens + r.batch * T - 1) / (r.batch * T);
  const int64_t batches = std::min(wanted, loader.batches_per_epoch());
  if (batches < wanted)
    say(r.note, fmt::format("note: the held-out shards hold {} batches of {} x {}; measuring on all of them\n", batches,
                            r.batch, T));
  const std::string name = run_label(t.checkpoint);
  m.model.model->to(r.placement.device);
  MeasureOptions mo;
  mo.batches = batches;
  mo.bins = r.bins;
  mo.backend = r.placement.backend;
  if (r.progress) mo.progress = [&](int64_t done, int64_t total) { r.progress(name, done, total); };
  DistanceProfile& p = m.profile;
  p = measure_distance(m.model.model, loader, mo);
  m.model.model = GPT{nullptr};  // the profile is all that is kept
  p.source = name;
  p.seed = cfg.train.seed;
  p.checkpoint = m.model.path;
  p.step = m.model.step;
  p.data = fmt::format("{}", fmt::join(shards, ","));
  p.tokens_id = held_out_tokens_id(shards, loader, batches);
  say(r.print, fmt::format("{} (step {}, heads [{}], {}): D_l on {} held-out tokens ({} batches of {} x {}), "
                           "threads {}, back end {}\n",
                           name, m.model.step, fmt::join(p.heads, ","), m.model.path, p.tokens(), batches, r.batch, T,
                           torch::get_num_threads(), p.backend) +
                   format_profile_table(p, cfg.model.d_model, r.confidence) + "\n");
  return m;
}

}  // namespace

std::vector<std::string> held_out_shards(const std::string& data) {
  if (fs::is_regular_file(data)) return {data};
  return find_shards(data, "val");
}

// Identifies the windows read: shard names and sizes (the loader's fingerprint) and the shape.
std::string held_out_tokens_id(const std::vector<std::string>& shards, const TokenLoader& loader, int64_t batches) {
  std::string names;
  for (const auto& s : shards) names += (names.empty() ? "" : ",") + fs::path(s).filename().string();
  return fmt::format("{}|{:016x}|{}x{}x{}", names, loader.state().fingerprint, batches, loader.options().batch,
                     loader.options().seq_len);
}

HeldOutResult measure_heldout(const HeldOutRequest& r) {
  validate(r);
  const auto shards = held_out_shards(r.data);
  // Every destination is found before any model runs.
  std::vector<Target> targets;
  for (const auto& c : r.checkpoints) targets.push_back({c, result_store_path(c, r.out, "prism distance"), false});
  for (const auto& c : r.baselines) targets.push_back({c, result_store_path(c, r.out, "prism distance"), true});

  std::vector<Measured> measured;
  for (const auto& t : targets) measured.push_back(measure_one(r, t, shards));

  HeldOutResult result;
  for (const auto& m : measured) {
    RunStore store = open_result_store(m.target.store, m.model);
    store.write_group("attention/heldout", to_result_group(m.profile));
    store.close();
    say(r.print, fmt::format("profile -> {}:/attention/heldout\n\n", m.target.store));
    (m.target.baseline ? result.baseline : result.prism).push_back(m.profile);
    result.stores.push_back(m.target.store);
  }
  if (result.baseline.empty()) return result;
  result.delta = distance_delta(result.prism, result.baseline, r.confidence);
  say(r.print, "Delta D_l = D_l(Prism) - D_l(baseline), tokens\n" +
                   format_delta_table(*result.delta, measured.front().model.config.model.d_model));
  for (size_t i = 0; i < measured.size(); ++i) {
    if (measured[i].target.baseline) continue;
    RunStore store = RunStore::open(measured[i].target.store);
    store.write_group("attention/delta", to_result_group(*result.delta));
    store.close();
    say(r.print, fmt::format("delta -> {}:/attention/delta\n", measured[i].target.store));
  }
  return result;
}

}  // namespace prism
