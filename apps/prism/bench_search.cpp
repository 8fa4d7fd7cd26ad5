// prism bench search: the time of a weight-sharing schedule search against plain
// training of the same model, side by side in one process: training steps of
// plain training and of each search method take turns (so load from other
// processes falls on all alike), then each search's ranking of its space and its
// per-validation work are timed once, and one search run is projected against
// one plain run of train.max_steps steps.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <iostream>
#include <thread>

#include "bench.h"
#include "cli.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/search/schedule_search.h"
#include "prism/search/search_plan.h"
#include "prism/train/optimizer.h"
#include "prism/train/turn_timing.h"

namespace prism::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A search arm: a method, and for a mixture the counts run per layer (-1: the file's search.mixture.paths).
struct ArmSpec {
  SearchMethod method = SearchMethod::SinglePath;
  int paths = -1;
};

// --methods: "spos", "mixture" (the file's paths) or "mixture:N" (N counts per layer; 0: all), comma-separated.
std::vector<ArmSpec> parse_methods(const std::string& text) {
  const std::string fix = "use e.g. --methods spos,mixture or --methods spos,mixture:0,mixture:2";
  std::vector<ArmSpec> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string tok = text.substr(at, comma - at);
    at = comma + 1;
    ArmSpec a;
    if (tok == "spos") {
      a.method = SearchMethod::SinglePath;
    } else if (tok == "mixture") {
      a.method = SearchMethod::Mixture;
    } else if (tok.rfind("mixture:", 0) == 0 && tok.size() > 8 &&
               tok.find_first_not_of("0123456789", 8) == std::string::npos && tok.size() < 14) {
      a.method = SearchMethod::Mixture;
      a.paths = std::stoi(tok.substr(8));
      if (a.paths == 1) throw Error("--methods " + text + ": mixture:1 gives the architecture weights no gradient", "prism bench search", fix);
    } else {
      throw Error("--methods " + text + ": unknown method '" + tok + "'", "prism bench search", fix);
    }
    out.push_back(a);
  }
  return out;
}

// One model in training on random tokens: plain, or under a search method.
struct Arm {
  Arm(const SearchPlan& plan, std::optional<ArmSpec> spec, const Execution& exec, int64_t accum)
      : model(nullptr), exec(exec), accum(accum) {
    torch::manual_seed(0);
    const Config& c = plan.config;
    model = GPT(c.model, c.schedule, attention::parse_backend(c.attention.backend));
    opt = make_adamw(*model, c.train);
    next = random_token_batches(c.model.vocab_size, c.train.batch_size, c.train.seq_len, 1);
    if (spec) {
      search_plan = plan;
      search_plan.settings.method = spec->method;
      if (spec->paths >= 0) search_plan.settings.mixture.paths = spec->paths;
      search.emplace(search_plan, [](const std::string&) {});
      search->attach(model, exec);
    }
  }
  Arm(const Arm&) = delete;

  void step() {
    MicroBatchOptions micro;
    if (search) micro = [this](int64_t m) { return search->micro_batch(steps, m, accum); };
    optimizer_step(model, *opt, exec, next, accum, 1.0, nullptr, micro);
    steps += 1;
    if (search) search->after_step(steps, nullptr);
  }

  GPT model;
  Execution exec;
  int64_t accum;
  std::unique_ptr<torch::optim::AdamW> opt;
  BatchSource next;
  SearchPlan search_plan;
  std::optional<ScheduleSearch> search;
  int64_t steps = 0;
};

// The held-out loss on `batches` fixed random batches, as the trainer's validation computes it.
HeldOutLoss random_held_out(GPT& model, const Execution& exec, const TrainConfig& t, int64_t max_batches) {
  auto gen = random_token_batches(model->config().vocab_size, t.batch_size, t.seq_len, 99);
  auto fixed = std::make_shared<std::vector<std::pair<torch::Tensor, torch::Tensor>>>();
  for (int64_t b = 0; b < max_batches; ++b) fixed->push_back(gen());
  return [&model, exec, fixed](const ForwardOptions& options, int64_t batches) {
    torch::NoGradGuard ng;
    model->eval();
    const int64_t n = batches > 0 ? std::min<int64_t>(batches, static_cast<int64_t>(fixed->size()))
                                  : static_cast<int64_t>(fixed->size());
    double sum = 0;
    for (int64_t b = 0; b < n; ++b) {
      AutocastScope autocast(exec);
      sum += model->forward((*fixed)[static_cast<size_t>(b)].first, (*fixed)[static_cast<size_t>(b)].second, options)
                 .loss.item<double>();
    }
    ValRow r;
    r.loss = sum / static_cast<double>(n);
    return r;
  };
}

const char* kUsage =
    "SEARCH.yaml [key=value ...] [options]\n\n"
    "Times a weight-sharing schedule search against plain training of the same model and\n"
    "config, in one process on random tokens: training steps of plain training and of each\n"
    "search method (--methods) take turns, step by step, after warm-up; then each method's\n"
    "ranking of the search file's space and the work it adds at each validation are timed\n"
    "once on its trained-so-far model. Prints per-step times, ratios to plain training (the\n"
    "median of the paired step-time ratios), and one search run projected against one plain\n"
    "run of train.max_steps steps: (steps x search step + validations x their extra work +\n"
    "ranking) / (steps x plain step). Progress goes to stderr.";

// Declares the options of `prism bench search`.
void add_options(po::options_description& o) {
  o.add_options()
      ("search", po::value<std::string>(), "search file")
      ("set", po::value<std::vector<std::string>>()->composing(), "key=value overrides (positional)")
      ("methods", po::value<std::string>()->default_value("spos,mixture"),
       "search methods to time, comma-separated: spos, mixture (the file's search.mixture.paths), mixture:N (N "
       "counts per layer and micro-batch; mixture:0 all of them)")
      ("steps", po::value<int>()->default_value(20), "timed steps per arm")
      ("warmup", po::value<int>()->default_value(3), "untimed warm-up steps per arm")
      ("threads", po::value<int>()->default_value(0), "intra-op threads (0: the config's train.threads)");
}

// What is timed: the search file's plan, how it executes, the steps and the search methods.
struct Bench {
  SearchPlan plan;
  Execution exec;
  int steps = 0, warmup = 0;
  std::vector<ArmSpec> methods;
  int64_t accum = 1;  // micro-batches per optimizer step
};

// Reads the search file with its overrides and the options; throws for a missing file, bad counts or methods.
Bench load_bench(const po::variables_map& vm) {
  if (!vm.count("search"))
    throw Error("no search file given", "prism bench search", "e.g. prism bench search experiments/search/cpu-128.yaml");
  std::vector<std::string> overrides;
  if (vm.count("set")) overrides = vm["set"].as<std::vector<std::string>>();
  Bench b;
  b.plan = plan_search(vm["search"].as<std::string>(), overrides);
  resolve_data_settings(b.plan.config);  // the vocabulary follows the data, as in a run
  TrainConfig& t = b.plan.config.train;
  if (vm["threads"].as<int>() > 0) t.threads = vm["threads"].as<int>();
  b.exec = resolve_execution(t);
  b.steps = vm["steps"].as<int>();
  b.warmup = vm["warmup"].as<int>();
  if (b.steps < 1 || b.warmup < 0) throw Error("--steps must be at least 1 and --warmup at least 0", "prism bench search", "e.g. --steps 20");
  b.methods = parse_methods(vm["methods"].as<std::string>());
  const int64_t micro = t.batch_size * t.seq_len;
  b.accum = t.tokens_per_step > 0 ? t.tokens_per_step / micro : 1;
  return b;
}

// Prints what is compared: the machine, the model and its steps, and the search space.
void print_header(const Bench& b) {
  const Config& c = b.plan.config;
  std::cout << "prism bench search: a search's training steps, per-validation work and ranking against plain "
               "training steps of the same model\n";
  std::cout << "machine: " << machine_description() << " | " << b.exec.describe() << "\n";
  std::cout << fmt::format("model: {} layers x {}, vocab {}, {} micro-batch{} of {}x{} per step, attention {}; "
                           "plain training under {}\n",
                           c.model.n_layer, c.model.d_model, c.model.vocab_size, b.accum, b.accum == 1 ? "" : "es",
                           c.train.batch_size, c.train.seq_len, c.attention.backend, c.schedule.compact());
  std::cout << fmt::format("space: {}\n", b.plan.space.describe());
}

// The arms: plain training first, then one per search method.
std::vector<std::unique_ptr<Arm>> make_arms(const Bench& b) {
  std::vector<std::unique_ptr<Arm>> arms;
  arms.push_back(std::make_unique<Arm>(b.plan, std::nullopt, b.exec, b.accum));
  for (const ArmSpec& sm : b.methods) arms.push_back(std::make_unique<Arm>(b.plan, sm, b.exec, b.accum));
  return arms;
}

// An arm's row label; K: the head counts per layer in the space.
std::string arm_name(const Arm& arm, size_t K) {
  if (!arm.search) return std::string("plain training");
  const SearchPlan& p = arm.search_plan;
  if (p.settings.method != SearchMethod::Mixture) return fmt::format("search, {}", method_name(p.settings.method));
  return fmt::format("search, mixture {}/{}", mixture_paths(p.settings.mixture, K), K);
}

// Warms the arms up, then times `steps` steps of each, the arms taking turns; the seconds per arm and step.
std::vector<std::vector<double>> time_turns(std::vector<std::unique_ptr<Arm>>& arms, int warmup, int steps) {
  std::cerr << fmt::format("bench search: {} warm-up + {} timed steps of {} arms, taking turns ...\n", warmup, steps,
                           arms.size());
  std::vector<std::function<void()>> steppers;
  for (auto& a : arms) steppers.push_back([&a] { a->step(); });
  TurnPlan plan;
  plan.warmup = warmup;
  plan.steps = steps;
  auto last = Clock::now();
  plan.after_round = [&](const char* phase, int done, int total) {
    if (std::string(phase) != "timed" || seconds_since(last) <= 10) return;
    last = Clock::now();
    std::cerr << fmt::format("bench search: timed step {}/{}\n", done, total);
  };
  return time_in_turns(steppers, plan);
}

// What one search run is projected from: plain training's mean step, and the run's steps and validations.
struct Projection {
  double plain = 0;  // seconds per plain training step
  int64_t max_steps = 0;
  double validations = 0;
};

// Times a search arm's work at one validation and its ranking, prints its row and returns its note.
std::string search_row(const Bench& b, Arm& arm, const std::vector<double>& times, const std::vector<double>& plain_times,
                       const Projection& pr) {
  const std::string name = arm_name(arm, b.plan.space.choices().size());
  const double mean = std::accumulate(times.begin(), times.end(), 0.0) / b.steps;
  const auto& rk = b.plan.settings.rank;
  const int64_t held_out = std::max<int64_t>({rk.batches, rk.probe_batches, int64_t{1}});
  const HeldOutLoss loss = random_held_out(arm.model, b.exec, b.plan.config.train, held_out);
  std::cerr << fmt::format("bench search: {}: timing the work at one validation and the ranking ...\n", name);
  auto t0 = Clock::now();
  arm.search->measure(arm.steps, loss, nullptr);
  const double per_validation = seconds_since(t0);
  t0 = Clock::now();
  arm.search->finish(loss, nullptr, "", /*root=*/false);
  const double ranking = seconds_since(t0);
  const double run_ratio = (static_cast<double>(pr.max_steps) * mean + pr.validations * per_validation + ranking) /
                           (static_cast<double>(pr.max_steps) * pr.plain);
  std::cout << fmt::format("{:<22} {:>12.1f} {:>9.3f}x {:>14.2f} {:>14.1f} {:>15.3f}x\n", name, 1e3 * mean,
                           paired_ratio(times, plain_times).median, per_validation, ranking, run_ratio);
  return fmt::format("{}: the ranking evaluated {} schedules exactly{}", name, arm.search->ranking()->ranked.size(),
                     arm.search->ranking()->probes > 0 ? fmt::format(" and {} probes", arm.search->ranking()->probes)
                                                       : std::string());
}

// Prints the notes under the table: each ranking's size, what mixture n/K means, and how the ratios are formed.
void print_notes(const Bench& b, const std::vector<std::string>& notes, const Projection& pr) {
  std::cout << "\n";
  for (const auto& n : notes) std::cout << n << "\n";
  for (const ArmSpec& sm : b.methods)
    if (sm.method == SearchMethod::Mixture) {
      std::cout << "mixture n/K: n of the K head counts per layer run per training micro-batch (search.mixture.paths: "
                   "n < K sampled from the weights, renormalized; K: the exact mixture); validation and ranking use all K.\n";
      break;
    }
  std::cout << fmt::format(
      "vs plain: median over the {} timed steps of the paired step-time ratios (the arms take turns). run of {} steps: "
      "({} x the mean search step + {:.0f} validations x their extra work + the ranking) / ({} x the mean plain "
      "step); validation itself, the same in both, is left out.\n",
      b.steps, pr.max_steps, pr.max_steps, pr.validations, pr.max_steps);
}

// Prints the table, plain training's row and then each search arm's, and the notes under it.
void report(const Bench& b, std::vector<std::unique_ptr<Arm>>& arms, const std::vector<std::vector<double>>& times) {
  const TrainConfig& t = b.plan.config.train;
  Projection pr;
  pr.plain = std::accumulate(times[0].begin(), times[0].end(), 0.0) / b.steps;
  pr.max_steps = t.max_steps;
  pr.validations = t.eval_every > 0 ? std::floor(static_cast<double>(pr.max_steps) / t.eval_every) + 1 : 2;
  std::cout << fmt::format("\n{:<22} {:>12} {:>10} {:>14} {:>14} {:>16}\n", "arm", "step (ms)", "vs plain",
                           "per valid. (s)", "ranking (s)", fmt::format("run of {} steps", pr.max_steps));
  std::cout << fmt::format("{:<22} {:>12.1f} {:>10} {:>14} {:>14} {:>16}\n", arm_name(*arms[0], b.plan.space.choices().size()),
                           1e3 * pr.plain, "1.00x", "-", "-", "1.00x");
  std::vector<std::string> notes;
  for (size_t a = 1; a < arms.size(); ++a) notes.push_back(search_row(b, *arms[a], times[a], times[0], pr));
  print_notes(b, notes, pr);
}

int run(const std::vector<std::string>& args) {
  return guarded("bench search", [&]() -> int {
    po::options_description o("Options");
    add_options(o);
    po::positional_options_description pos;
    pos.add("search", 1).add("set", -1);
    po::variables_map vm;
    if (!parse("bench search", kUsage, o, pos, args, vm)) return 0;
    const Bench b = load_bench(vm);
    print_header(b);
    std::vector<std::unique_ptr<Arm>> arms = make_arms(b);
    const std::vector<std::vector<double>> times = time_turns(arms, b.warmup, b.steps);
    report(b, arms, times);
    return 0;
  });
}

const BenchRegistration reg{{"search", "a schedule search's steps, validations and ranking against plain training steps", run}};

}  // namespace
}  // namespace prism::cli
