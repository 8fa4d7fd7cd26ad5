#include "prism/analysis/position_loss_eval.h"

#include <fmt/format.h>

#include <filesystem>

#include "prism/analysis/heldout_distance.h"
#include "prism/error.h"
#include "prism/store/checkpoint_reader.h"
#include "prism/store/result_store.h"
#include "prism/store/run_reader.h"
#include "prism/train/loader.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

void say(const std::function<void(const std::string&)>& to, const std::string& text) {
  if (to) to(text);
}

}  // namespace

PositionLoss evaluate_position_loss(const PositionLossRequest& r) {
  if (r.checkpoint.empty())
    throw Error("no checkpoint given", "prism eval", "pass a run directory, e.g. prism eval runs/demo --position-loss");
  if (r.tokens < 1 || r.batch < 0 || r.context < 0)
    throw Error("--tokens must be positive, --batch and --context not negative", "prism eval", "pass positive counts");
  const std::string store = r.store ? result_store_path(r.checkpoint, r.out, "prism eval") : std::string();
  LoadedModel m = load_model(r.checkpoint);
  const Config& cfg = m.config;
  if (!store.empty()) check_result_store(store, cfg.schedule.heads());
  const int64_t trained = cfg.train.seq_len > 0 ? cfg.train.seq_len : cfg.model.block_size;
  const int64_t T = r.context > 0 ? r.context : trained;
  const std::string data = r.data.empty() ? cfg.data.dir : r.data;
  const auto shards = held_out_shards(data);
  const int64_t batch = r.batch > 0 ? r.batch : std::max<int64_t>(1, 8192 / T);
  LoaderOptions lo;
  lo.shards = shards;
  lo.batch = batch;
  lo.seq_len = T;
  lo.shuffle = false;
  lo.vocab_size = cfg.model.vocab_size;
  TokenLoader loader(lo);
  if (loader.batches_per_epoch() < 1)
    throw Error(fmt::format("the validation shards hold {} tokens, less than one batch of {} x {}", loader.tokens(),
                            batch, T),
                data, "use a smaller --batch or --context, or more validation data");
  const int64_t wanted = (r.tokens + batch * T - 1) / (batch * T);
  const int64_t batches = std::min(wanted, loader.batches_per_epoch());
  if (batches < wanted)
    say(r.note, fmt::format("note: the validation shards hold {} batches of {} x {}; measuring on all of them\n",
                            batches, batch, T));
  m.model->to(r.placement.device);
  PositionLossOptions po;
  po.batches = batches;
  po.backend = r.placement.backend;
  po.progress = r.progress;
  PositionLoss p = measure_position_loss(m.model, loader, po);
  p.step = m.step;
  p.trained_context = trained;
  p.checkpoint = m.path;
  p.data = data;
  p.tokens_id = held_out_tokens_id(shards, loader, batches);
  const std::string run = find_run_store(r.checkpoint);
  p.source = run.empty() ? r.checkpoint : fs::path(run).parent_path().filename().string();
  say(r.print, fmt::format("{} (step {}, {} positions, trained on {} tokens, block_size {}): loss by position at "
                           "context {} on {} validation tokens ({} batches of {} x {}), back end {}, {}\n",
                           p.source, p.step, p.position, trained, cfg.model.block_size, T, batches * batch * T, batches,
                           batch, T, p.backend, p.dtype) +
                   format_position_loss_table(p));
  if (T > trained)
    say(r.print, p.position == "rope"
                     ? fmt::format("positions {}-{} lie past the trained context: rotations the model never saw\n",
                                   trained, T - 1)
                     : fmt::format("positions {}-{} lie past the trained context: their learned position embeddings "
                                   "never trained (still at their initial values)\n",
                                   trained, T - 1));
  if (!store.empty()) {
    RunStore s = open_result_store(store, m);
    s.write_group(position_loss_group(T), to_result_group(p));
    s.close();
    say(r.print, fmt::format("-> {}:/{}\n", store, position_loss_group(T)));
  }
  return p;
}

}  // namespace prism
