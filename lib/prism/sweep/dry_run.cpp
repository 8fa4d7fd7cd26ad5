#include "prism/sweep/dry_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "prism/config/config.h"
#include "prism/config/cost.h"
#include "prism/config/model_config.h"
#include "prism/error.h"
#include "prism/format.h"
#include "prism/stats/sequential.h"
#include "prism/stats/stats.h"
#include "prism/sweep/halving.h"
#include "prism/sweep/index.h"
#include "prism/sweep/plan.h"
#include "prism/sweep/sweep.h"
#include "prism/train/cpu_dtype_probe.h"
#include "prism/train/step_probe.h"

namespace fs = std::filesystem;

namespace prism {
namespace {

std::string first_model_line(const SweepPlan& plan) {
  if (plan.trials.empty()) return "";
  const Trial& t = plan.trials[0];
  const Config c = trial_config(t);
  const ModelConfig& m = c.model;
  return fmt::format("model {}: {} layers x {}, baseline {} heads, vocabulary {}{}; {} steps x {} tokens per trial",
                     m.preset.empty() ? std::string("custom") : m.preset, m.n_layer, m.d_model, m.n_head,
                     m.vocab_size, m.vocab_from_data ? fmt::format(" ({})", c.vocab_source) : std::string(),
                     t.max_steps, t.step_tokens);
}

// Training FLOPs per token of a trial (cost model: 3x forward at the trial's context,
// on the data's vocabulary where the data is reachable).
double trial_flops_per_token(const Trial& t) {
  const Config c = trial_config(t);
  const int64_t context = c.train.seq_len > 0 ? c.train.seq_len : c.model.block_size;
  return model_cost(c.model, t.schedule, static_cast<int>(context)).train_flops_per_token;
}

// Tokens/s one device trains the trial at: as stated, or from peak FLOP/s x MFU.
double trial_tokens_per_s(const EstimateSettings& e, double flops_per_token) {
  if (e.tokens_per_s > 0) return e.tokens_per_s;
  return e.peak_flops * e.mfu / flops_per_token;
}

// What a step's time depends on besides the schedule: trials with the same key differ only
// in their FLOPs per token.
std::string setup_key(const Config& c) {
  return fmt::format("{}x{}/{} v{} | B{} T{} tps{} | {} {} {} | {}", c.model.n_layer, c.model.d_model, c.model.n_head,
                     c.model.vocab_size, c.train.batch_size, c.train.seq_len, c.train.tokens_per_step, c.train.device,
                     c.train.dtype, c.attention.backend, static_cast<int>(c.model.position));
}

// Why a setup's step is not timed here ("" when it can be).
std::string not_measurable(const Config& c, double step_flops) {
  if (c.train.device.rfind("cuda", 0) == 0 && !torch::cuda::is_available())
    return fmt::format("its trials train on {}, which this machine lacks", c.train.device);
  if (c.train.device == "cpu" || c.train.device == "auto") {
    const double fp32 = cpu_matmul_rates().fp32_gflops;
    const double s = fp32 > 0 ? step_flops / (fp32 * 1e9) : 0;
    if (s > 60) return fmt::format("one step would take about {} here", format_duration(s));
  }
  return "";
}

}  // namespace

std::string format_measured_eta(const SweepPlan& plan, int jobs, int threads, double* eta_s) {
  struct Setup {
    std::string key, first, why_not, execution;
    double step_s = 0, flops_per_token = 0;
  };
  std::vector<Setup> setups;
  double total_s = 0;
  int64_t trials_costed = 0;
  std::vector<std::string> skipped;
  for (const auto& t : plan.trials) {
    Config c = trial_config(t);
    c.train.threads = threads_per_trial(threads, jobs);
    const std::string key = setup_key(c);
    auto it = std::find_if(setups.begin(), setups.end(), [&](const Setup& s) { return s.key == key; });
    const double fpt = trial_flops_per_token(t);
    if (it == setups.end()) {
      Setup s;
      s.key = key;
      s.first = t.name;
      s.flops_per_token = fpt;
      s.why_not = setups.size() >= 4 ? std::string("more than 4 setups: only the first 4 are timed")
                                     : not_measurable(c, fpt * static_cast<double>(t.step_tokens));
      if (s.why_not.empty()) {
        const StepTiming st = time_training_steps(c);
        s.step_s = st.seconds;
        s.execution = fmt::format("{}{}", st.execution, st.dtype_reason.rfind("auto", 0) == 0 ? "; " + st.dtype_reason : "");
      }
      setups.push_back(s);
      it = setups.end() - 1;
    }
    if (!it->why_not.empty()) {
      skipped.push_back(t.name);
      continue;
    }
    total_s += static_cast<double>(t.max_steps) * it->step_s * fpt / it->flops_per_token;
    trials_costed += 1;
  }
  if (eta_s) *eta_s = trials_costed == static_cast<int64_t>(plan.trials.size()) ? total_s / std::max(jobs, 1) : 0;
  std::string out;
  for (const auto& s : setups) {
    if (s.why_not.empty())
      out += fmt::format("step time measured here: {:.3f} s per step of {} ({})\n", s.step_s, s.first, s.execution);
    else
      out += fmt::format("step time not measured for {} and its like: {}\n", s.first, s.why_not);
  }
  if (trials_costed > 0)
    out += fmt::format("ETA here: about {} for {} of {} trials, {} at a time{}\n",
                       format_duration(total_s / std::max(jobs, 1)), trials_costed, plan.trials.size(), jobs,
                       plan.settings.halving.enabled ? " (every trial at its full budget: successive halving stops "
                                                       "some early, so this is an upper bound)"
                                                     : "");
  else
    out += "ETA here: none (no step could be measured on this machine)\n";
  if (const std::string w = sweep_bf16_warning(plan, jobs, threads); !w.empty()) out += w;
  return out;
}

PairedSd pilot_paired_sd(const std::string& dir) {
  const fs::path yaml = fs::path(dir) / "sweep.yaml";
  if (!fs::exists(yaml))
    throw Error("not a sweep directory (no sweep.yaml)", dir, "pass --pilot a finished sweep of the same setting");
  const SweepPlan pilot = plan_from_yaml(yaml.string());
  const std::vector<TrialOutcome> outcomes = collect_outcomes(pilot, dir, {});
  // Final losses at the full budget, by configuration (group) and seed; the baseline group of each configuration.
  std::map<std::string, std::map<uint64_t, double>> loss;
  std::map<std::string, std::string> baseline_of;  // other grid values -> the uniform group
  auto others = [](const Trial& t) {
    std::string k;
    for (const auto& [key, value] : t.params)
      if (key != "train.seed") k += key + "=" + value + ";";
    return k;
  };
  for (const auto& o : outcomes) {
    if (o.status != "completed" || o.budget_steps != o.trial->max_steps || !std::isfinite(o.final_val)) continue;
    loss[o.trial->group][o.trial->seed] = o.final_val;
    if (o.trial->baseline) baseline_of[others(*o.trial)] = o.trial->group;
  }
  PairedSd r;
  double ss = 0;
  int df = 0;
  r.lo = r.hi = std::numeric_limits<double>::quiet_NaN();
  std::set<std::string> seen;
  for (const auto& t : pilot.trials) {
    if (t.baseline || !seen.insert(t.group).second || !baseline_of.count(others(t))) continue;
    const auto& mine = loss[t.group];
    const auto& base = loss[baseline_of[others(t)]];
    std::vector<double> d;
    for (const auto& [seed, v] : mine)
      if (base.count(seed)) d.push_back(v - base.at(seed));
    if (d.size() < 2) continue;
    const double sd = sample_sd(d);
    ss += sd * sd * static_cast<double>(d.size() - 1);
    df += static_cast<int>(d.size() - 1);
    r.comparisons += 1;
    r.pairs += static_cast<int>(d.size());
    r.lo = std::isnan(r.lo) ? sd : std::min(r.lo, sd);
    r.hi = std::isnan(r.hi) ? sd : std::max(r.hi, sd);
  }
  if (df == 0)
    throw Error("the pilot sweep has no configuration with 2 or more seeds paired with its uniform runs", dir,
                "finish at least 2 seeds of a schedule and of uniform there, or state sweep.power.sd with its source");
  r.sd = std::sqrt(ss / df);
  return r;
}

std::string format_sequential_plan(const SequentialSettings& q, int comparisons, double sd, double effect,
                                   int sims) {
  SequentialDesign d;
  d.first = q.first;
  d.step = q.step;
  d.cap = q.cap;
  d.margin = effect;
  const SequentialLevels lv = sequential_levels(d, comparisons);
  std::vector<std::string> looks;
  for (int k = 0; k < d.looks(); ++k) looks.push_back(std::to_string(d.pairs_at(k)));
  std::string out = fmt::format(
      "  sequential (sweep.sequential): looks at {} seed pairs; at every look a comparison is better/worse at p < "
      "{:.4g}, equivalent within +-{:.4f} at TOST p < {:.4g} (one level for all looks: {} over any look, {} per "
      "comparison; prism report --sequential applies it)\n",
      fmt::join(looks, ", "), lv.difference, effect, lv.equivalence, 0.05, comparisons == 1 ? "0.05" : fmt::format("0.05/{}", comparisons));
  const SequentialSim null = simulate_sequential(d, comparisons, 0.0, sd, sims, 11);
  const SequentialSim edge = simulate_sequential(d, comparisons, effect, sd, sims, 12);
  const SequentialSim real = simulate_sequential(d, comparisons, -effect, sd, sims, 13);
  const int fixed = real.correct_each > 0.05 && real.correct_each < 1
                        ? pairs_for_effect(effect, sd, 0.05 / comparisons, real.correct_each)
                        : -1;
  out += fmt::format(
      "  {} simulated studies at sd {:.4f}: no effect: a false better/worse verdict in {:.2f}% of studies (at most 5%), "
      "{:.1f} pairs on average; an effect of exactly +-{:.4f}: a false \"equivalent\" in {:.2f}%; an effect of {:.4f}: "
      "the right verdict for {:.1f}% of comparisons with {:.1f} pairs on average ({:.0f}% stop before {}), where a "
      "fixed design of that power at the same level needs {} pairs\n",
      sims, sd, null.any_difference * 100, null.mean_pairs, effect, edge.any_equivalent * 100, effect,
      real.correct_each * 100, real.mean_pairs, real.stopped_early * 100, d.cap, fixed > 0 ? std::to_string(fixed) : "-");
  return out;
}

std::string format_power_plan(const SweepPlan& plan, const std::string& pilot_dir, double eta_s) {
  std::set<uint64_t> seeds;
  std::set<std::string> comparisons;
  double flops = 0, device_h = 0;
  // One comparison's own cost: its schedule's trials and the baseline's, per seed (the baseline
  // shared by every comparison, so the grid's cost is not the comparisons' sum).
  double base_flops = 0, base_h = 0, cmp_flops = 0, cmp_h = 0;
  const EstimateSettings& est = plan.settings.estimate;
  const bool hours = est.tokens_per_s > 0 || est.peak_flops > 0;
  for (const auto& t : plan.trials) {
    seeds.insert(t.seed);
    if (!t.baseline) comparisons.insert(t.group);
    const double n = static_cast<double>(t.max_steps * t.step_tokens), fpt = trial_flops_per_token(t);
    const double h = hours ? n / trial_tokens_per_s(est, fpt) / 3600.0 : 0;
    flops += fpt * n;
    device_h += h;
    (t.baseline ? base_flops : cmp_flops) += fpt * n;
    (t.baseline ? base_h : cmp_h) += h;
  }
  if (comparisons.empty() || plan.trials.empty()) return "";
  const int m = static_cast<int>(comparisons.size()), s = static_cast<int>(seeds.size());
  const double alpha = 0.05, power = 0.8;
  std::string sd_text;
  double sd = 0;
  if (!pilot_dir.empty()) {
    const PairedSd p = pilot_paired_sd(pilot_dir);
    sd = p.sd;
    sd_text = fmt::format("{:.4f} nats, measured in the pilot {} ({} comparison{}, {} pairs; {:.4f}-{:.4f} each)", sd,
                          pilot_dir, p.comparisons, p.comparisons == 1 ? "" : "s", p.pairs, p.lo, p.hi);
  } else if (plan.settings.power.sd > 0) {
    sd = plan.settings.power.sd;
    sd_text = fmt::format("{:.4f} nats, as sweep.power states (source: {})", sd, plan.settings.power.source);
  }
  std::string out = fmt::format(
      "power plan (two-sided paired t at {}, {:.0f}% power; {} comparison{} against uniform, Holm's first step at "
      "{:.3g}):\n",
      alpha, power * 100, m, m == 1 ? "" : "s", alpha / m);
  if (sd == 0)
    return out + "  no sd of Prism - uniform paired by seed: the seeds this grid needs are not known. Fix: pass "
                 "--pilot DIR (a finished sweep of the same setting with 2+ seeds), or state sweep.power: {sd: ..., "
                 "source: ...}\n";
  const std::string preset = trial_config(plan.trials[0]).model.preset;
  const PaperEffect paper = paper_effect(preset);
  const bool stated = plan.settings.power.effect > 0;
  const double effect = stated ? plan.settings.power.effect : paper.nats;
  const std::string effect_src = stated ? "sweep.power.effect" : paper.source;
  out += "  sd of the paired differences: " + sd_text + "\n";
  if (s < 2)
    out += fmt::format("  with this grid's {} seed: no paired interval (a paired t needs 2 seeds or more)\n", s);
  else
    out += fmt::format("  with this grid's {} seeds: detects {:.4f} nats ({:.4f} at Holm's first step)\n", s,
                       min_detectable_effect(sd, s, alpha, power), min_detectable_effect(sd, s, alpha / m, power));
  auto cost = [&](int n) {
    const double k = static_cast<double>(n) / std::max(s, 1);
    // One comparison: the baseline's trials and one schedule's (the mean over schedules), n seeds.
    const double one_f = (base_flops + cmp_flops / m) * k, one_h = (base_h + cmp_h / m) * k;
    std::string c = fmt::format("one comparison {:.3e} training FLOPs", one_f);
    if (hours) c += fmt::format(", {:.1f} device-h", one_h);
    c += fmt::format("; the whole grid {:.3e}", flops * k);
    if (hours) c += fmt::format(", {:.1f} device-h", device_h * k);
    if (eta_s > 0) c += fmt::format(", about {} here", format_duration(eta_s * k));
    return c;
  };
  const int n1 = pairs_for_effect(effect, sd, alpha, power), nh = pairs_for_effect(effect, sd, alpha / m, power);
  out += fmt::format("  to detect {:.4f} nats ({}): {} seeds ({}); {} at Holm's first step ({})\n", effect, effect_src,
                     n1, n1 > 0 ? cost(n1) : "-", nh, nh > 0 ? cost(nh) : "-");
  if (s < n1)
    out += fmt::format("  this grid's {} seed{} fewer than the {} the target needs: a null result would be "
                       "unresolved, not equivalence\n", s, s == 1 ? " is" : "s are", n1);
  if (plan.settings.sequential.first > 0) out += format_sequential_plan(plan.settings.sequential, m, sd, effect);
  return out;
}

std::string sweep_bf16_warning(const SweepPlan& plan, int jobs, int threads) {
  for (const auto& t : plan.trials) {
    const Config c = trial_config(t);
    if (c.train.dtype != "bf16" || (c.train.device != "cpu" && c.train.device != "auto")) continue;
    if (c.train.device == "auto" && torch::cuda::is_available()) continue;
    torch::set_num_threads(threads_per_trial(threads, jobs));
    StepWork w;
    w.d_model = c.model.d_model;
    w.rows = c.train.batch_size * c.train.seq_len;
    w.flops = trial_flops_per_token(t) * static_cast<double>(t.step_tokens);
    w.steps = t.max_steps;
    const std::string warning = slow_bf16_warning(w);
    if (warning.empty()) return "";
    return fmt::format("{} (trial {}; the sweep's trials name train.dtype bf16: each of its {} trials at {} steps)\n",
                       warning, t.name, plan.trials.size(), t.max_steps);
  }
  return "";
}

std::string format_dry_run(const SweepPlan& plan, const std::string& out, int jobs, int threads) {
  std::string s;
  s += fmt::format("sweep {} ({}): {} trial{}, axes: {}\n", plan.settings.name, plan.source,
                   plan.trials.size(), plan.trials.size() == 1 ? "" : "s", fmt::join(plan.axes, " x "));
  s += first_model_line(plan) + "\n";
  const EstimateSettings& est = plan.settings.estimate;
  const bool hours = est.tokens_per_s > 0 || est.peak_flops > 0;
  size_t w = 4;
  for (const auto& t : plan.trials) w = std::max(w, t.name.size());
  s += fmt::format("  {:>5}  {:<{}}  {:<16}  {:>4}  {:>10}  {}{}\n", "index", "name", w, "schedule", "seed",
                   "train FLOP", hours ? "device-h  " : "", "heads");
  int64_t tokens = 0;
  double flops = 0, device_h = 0;
  for (const auto& t : plan.trials) {
    const int64_t n = t.max_steps * t.step_tokens;
    const double fpt = trial_flops_per_token(t), f = fpt * static_cast<double>(n);
    const double h = hours ? static_cast<double>(n) / trial_tokens_per_s(est, fpt) / 3600.0 : 0;
    s += fmt::format("  {:>5}  {:<{}}  {:<16}  {:>4}  {:>10.3e}  {}{}\n", t.index, t.name, w,
                             schedule_label(t), t.seed, f, hours ? fmt::format("{:>8.1f}  ", h) : "",
                             t.schedule.list());
    tokens += n;
    flops += f;
    device_h += h;
  }
  s += fmt::format("full grid: {} runs, {} training tokens, {:.3e} training FLOPs (model FLOPs, 3x forward)\n",
                   plan.trials.size(), tokens, flops);
  if (hours) {
    const std::string rate =
        est.tokens_per_s > 0
            ? fmt::format("{:.3g} tokens/s per trial", est.tokens_per_s)
            : fmt::format("{:.0f}% of {:.3g} FLOP/s ({:.3g} tokens/s for trial 0)", 100 * est.mfu, est.peak_flops,
                          plan.trials.empty() ? 0.0 : trial_tokens_per_s(est, trial_flops_per_token(plan.trials[0])));
    s += fmt::format("device-hours at {} on {} ({}): {:.1f} in all\n", rate,
                             est.device.empty() ? "one device" : est.device,
                             est.source.empty() ? "throughput as stated in the sweep file" : est.source, device_h);
  }
  if (plan.settings.halving.enabled && !plan.trials.empty()) {
    const auto b = rung_budgets(plan.trials[0].max_steps, plan.settings.halving);
    const HalvingSettings& h = plan.settings.halving;
    s += fmt::format("successive halving (eta {}): rungs at {} steps; the best 1/{} of the configurations "
                     "(seeds pooled){} move up each rung{}{}\n",
                     h.eta, fmt::join(b, ", "), h.eta,
                     h.noise_k > 0 ? fmt::format(" and those within {} paired standard errors of the best", h.noise_k)
                                   : std::string(),
                     h.keep_baseline ? ", the baseline always" : "",
                     h.rung_seeds > 0 ? fmt::format("; rungs before the last run the first {} seed{}", h.rung_seeds,
                                                    h.rung_seeds == 1 ? "" : "s")
                                      : std::string());
  }
  s += fmt::format("would run in {}: {} at a time, {} thread{} each; nothing was run\n", out, jobs,
                   threads_per_trial(threads, jobs), threads_per_trial(threads, jobs) == 1 ? "" : "s");
  return s;
}

}  // namespace prism
