#include "prism/search/search.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "prism/atomic_file.h"
#include "prism/config/cost.h"
#include "prism/error.h"
#include "prism/search/results.h"
#include "prism/search/schedule_search.h"
#include "prism/train/distributed.h"

namespace fs = std::filesystem;

namespace prism {

SearchSummary run_search(const SearchPlan& plan, const SearchOptions& options) {
  std::function<void(const std::string&)> log = options.log;
  if (!log) log = [](const std::string& s) { std::cout << s << std::endl; };
  const bool root = read_distributed_env().rank == 0;
  const fs::path dir(options.run_dir);
  if (!options.resume && !options.force && (fs::exists(dir / "run.h5") || fs::exists(dir / "checkpoints")))
    throw Error("a run already exists here", options.run_dir,
                "continue it with --resume, choose another --out directory, or replace it with --force");
  if (root && !options.resume) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error(fmt::format("cannot create the run directory: {}", ec.message()), options.run_dir,
                        "check the path and permissions");
    write_file_atomic((dir / "search.yaml").string(), search_config_yaml(plan));
  }
  std::function<void(const std::string&)> quiet = [](const std::string&) {};
  ScheduleSearch search(plan, root ? log : quiet);
  TrainOptions to;
  to.run_dir = options.run_dir;
  to.resume = options.resume;
  to.force = options.force;
  to.log = log;
  to.extension = &search;
  SearchSummary out;
  out.train = train(plan.config, to);
  out.ranking = search.ranking();
  return out;
}

namespace {

struct Rate {
  double tokens_per_s = 0;  // 0: FLOPs only
  std::string text;
};

// Training throughput from search.estimate, as the sweep's dry run reads it.
Rate rate_of(const EstimateSettings& e, double train_flops_per_token) {
  Rate r;
  if (e.tokens_per_s > 0) r.tokens_per_s = e.tokens_per_s;
  else if (e.peak_flops > 0) r.tokens_per_s = e.peak_flops * e.mfu / train_flops_per_token;
  if (r.tokens_per_s > 0)
    r.text = fmt::format("{:.3g} training tokens/s on {} ({})", r.tokens_per_s, e.device.empty() ? "one device" : e.device,
                         e.source.empty() ? "as search.estimate states" : e.source);
  return r;
}

std::string hours(double flops, double train_flops_per_token, const Rate& rate) {
  if (rate.tokens_per_s <= 0) return "";
  return fmt::format(", {:.1f} device-hours", flops / train_flops_per_token / rate.tokens_per_s / 3600.0);
}

}  // namespace

SearchCost search_cost(const SearchPlan& plan) {
  const Config& c = plan.config;
  const SearchSettings& st = plan.settings;
  const RankSettings& rk = st.rank;
  SearchCost k;
  const int64_t T = c.train.seq_len > 0 ? c.train.seq_len : c.model.block_size;
  const int64_t batch_tokens = c.train.batch_size * T;
  k.step_tokens = c.train.tokens_per_step > 0 ? c.train.tokens_per_step : batch_tokens;
  const double run_tokens = static_cast<double>(c.train.max_steps) * static_cast<double>(k.step_tokens);
  const ModelCost cost = model_cost(c.model, HeadSchedule::uniform(c.model.n_layer, c.model.n_head), static_cast<int>(T));
  k.train_flops_per_token = cost.train_flops_per_token;
  const double K = static_cast<double>(mixture_paths(st.mixture, plan.space.choices().size()));
  double attention_fpt = 0;
  for (const auto& l : cost.layers) attention_fpt += l.attention_flops;
  k.search_flops_per_token = st.method == SearchMethod::Mixture ? k.train_flops_per_token + 3.0 * (K - 1.0) * attention_fpt
                                                               : k.train_flops_per_token;
  // The ranking's held-out forward passes.
  const int64_t val_batches = std::max<int64_t>(1, (c.train.eval_tokens + batch_tokens - 1) / batch_tokens);
  k.exact_batches = rk.batches > 0 ? rk.batches : val_batches;
  const bool whole = plan.space.size() <= static_cast<double>(rk.exact_limit);
  k.exact = (whole ? plan.space.size() : 2.0 * static_cast<double>(rk.candidates)) + static_cast<double>(rk.schedules.size());
  k.probes = !whole && st.method == SearchMethod::SinglePath
                 ? static_cast<double>(rk.probes > 0 ? rk.probes : default_probes(plan.space))
                 : 0.0;
  const double validations =
      c.train.eval_every > 0 ? std::floor(static_cast<double>(c.train.max_steps) / c.train.eval_every) + 1 : 2;
  k.progress = st.method == SearchMethod::SinglePath ? validations * static_cast<double>(rk.progress_probes) : 0.0;
  const double rank_tokens = static_cast<double>(batch_tokens) *
                             (k.exact * static_cast<double>(k.exact_batches) +
                              k.probes * static_cast<double>(rk.probe_batches) + k.progress);
  k.run_flops = run_tokens * k.train_flops_per_token;
  k.train_flops = run_tokens * k.search_flops_per_token;
  k.rank_flops = rank_tokens * cost.forward_flops_per_token;
  // Fine-tuning: the ranked schedules (every exact evaluation), each trained
  // finetune.steps steps and evaluated once on the held-out set.
  k.finetune_rungs = finetune_rungs(st.finetune, static_cast<int64_t>(k.exact));
  for (const FinetuneRung& rung : k.finetune_rungs)
    k.finetune_flops += static_cast<double>(rung.schedules) *
                        (static_cast<double>(rung.steps) * static_cast<double>(k.step_tokens) * k.train_flops_per_token +
                         static_cast<double>(val_batches * batch_tokens) * cost.forward_flops_per_token);
  const double seeds = static_cast<double>(st.seeds.size());
  k.retrain_flops = seeds * k.run_flops;
  k.grid_seeds = plan.grid_seeds > 0 ? static_cast<double>(plan.grid_seeds) : seeds;
  k.grid_flops = static_cast<double>(plan.grid.size()) * k.grid_seeds * k.run_flops;
  k.space_flops = plan.space.size() * seeds * k.run_flops;
  return k;
}

std::string format_search_dry_run(const SearchPlan& plan, const std::string& run_dir) {
  const Config& c = plan.config;
  const SearchSettings& st = plan.settings;
  const RankSettings& rk = st.rank;
  const SearchCost k = search_cost(plan);
  const double train_fpt = k.train_flops_per_token, search_fpt = k.search_flops_per_token;
  const Rate rate = rate_of(st.estimate, train_fpt);
  const double train_flops = k.train_flops, rank_flops = k.rank_flops, retrain_flops = k.retrain_flops;
  const double grid_flops = k.grid_flops, space_flops = k.space_flops, grid_seeds = k.grid_seeds;
  const double seeds = static_cast<double>(st.seeds.size());
  const double total = k.total();
  const double exact = k.exact, probes = k.probes, progress = k.progress;
  const int64_t exact_batches = k.exact_batches, step_tokens = k.step_tokens;
  const bool probing = probes > 0;
  std::string s;
  s += fmt::format("search {} ({}): {} over {}\n", st.name, plan.source, method_name(st.method), plan.space.describe());
  s += fmt::format("model: {} layers x {}, baseline {} heads, vocabulary {}{}; {} steps x {} tokens (train.*: the shared "
                   "model trains as one run does)\n",
                   c.model.n_layer, c.model.d_model, c.model.n_head, c.model.vocab_size,
                   c.model.vocab_from_data ? fmt::format(" ({})", c.vocab_source) : std::string(), c.train.max_steps,
                   step_tokens);
  if (!rate.text.empty()) s += "throughput: " + rate.text + "\n";
  s += fmt::format("cost (model FLOPs: training 3x forward, held-out evaluation 1x):\n");
  s += fmt::format("  search training   {:.3e} FLOPs{}{}\n", train_flops, hours(train_flops, train_fpt, rate),
                   st.method == SearchMethod::Mixture
                       ? fmt::format(" ({:.2f}x a plain run: {})", search_fpt / train_fpt,
                                     mixture_paths_text(st.mixture, plan.space.choices().size()))
                       : std::string(" (= one plain run)"));
  s += fmt::format("  ranking           {:.3e} FLOPs{} ({:.0f} exact evaluations x {} batches{}{})\n", rank_flops,
                   hours(rank_flops, train_fpt, rate), exact, exact_batches,
                   probing ? fmt::format(", {:.0f} probes x {} batches", probes, rk.probe_batches) : std::string(),
                   progress > 0 ? fmt::format(", {:.0f} progress probes", progress) : std::string());
  if (!k.finetune_rungs.empty())
    s += fmt::format("  fine-tuning       {:.3e} FLOPs{} ({} from the shared weights{}, 1 held-out evaluation each "
                     "run: finetune.yaml)\n",
                     k.finetune_flops, hours(k.finetune_flops, train_fpt, rate), finetune_text(k.finetune_rungs),
                     k.finetune_rungs.size() > 1 ? " under successive halving" : "");
  s += fmt::format("  retraining the pick with {} seed{}  {:.3e} FLOPs{}\n", st.seeds.size(), st.seeds.size() == 1 ? "" : "s",
                   retrain_flops, hours(retrain_flops, train_fpt, rate));
  s += fmt::format("  search + retraining  {:.3e} FLOPs{}\n", total, hours(total, train_fpt, rate));
  s += fmt::format("the grid it replaces: {} schedule{} x {:.0f} seed{} trained from scratch = {:.3e} FLOPs{}: the search "
                   "is {:.1f}% of it ({:.1f}x cheaper)\n",
                   plan.grid.size(), plan.grid.size() == 1 ? "" : "s", grid_seeds, grid_seeds == 1 ? "" : "s", grid_flops,
                   hours(grid_flops, train_fpt, rate), 100.0 * total / grid_flops, grid_flops / total);
  s += fmt::format("  (the grid: {}; the whole space as a grid, {:.0f} schedule{} x {:.0f} seed{}, would be {:.3e} FLOPs{})\n",
                   plan.grid_source, plan.space.size(), plan.space.size() == 1 ? "" : "s", seeds, seeds == 1 ? "" : "s",
                   space_flops, hours(space_flops, train_fpt, rate));
  s += fmt::format("would run in {}; nothing was run\n", run_dir);
  return s;
}

}  // namespace prism
