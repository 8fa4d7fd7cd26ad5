#include "prism/sweep/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "prism/error.h"
#include "prism/format.h"
#include "prism/sweep/run_result.h"
#include "prism/sweep/sweep_dir.h"

namespace fs = std::filesystem;

namespace prism {

// The trials whose seed is among the first `n` seeds of the grid (in trial order); all when n is 0.
std::vector<const Trial*> with_rung_seeds(const std::vector<const Trial*>& trials, int n) {
  if (n <= 0) return trials;
  std::vector<uint64_t> seeds;
  for (const Trial* t : trials)
    if (std::find(seeds.begin(), seeds.end(), t->seed) == seeds.end()) seeds.push_back(t->seed);
  std::sort(seeds.begin(), seeds.end());
  if (static_cast<int>(seeds.size()) > n) seeds.resize(static_cast<size_t>(n));
  std::vector<const Trial*> out;
  for (const Trial* t : trials)
    if (std::find(seeds.begin(), seeds.end(), t->seed) != seeds.end()) out.push_back(t);
  return out;
}

int threads_per_trial(int threads, int jobs) {
  const int total = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, total / std::max(1, jobs));
}

SweepStage sweep_stage(const SweepPlan& plan, const std::string& dir, RetryPolicy retry) {
  SweepStage st;
  const bool halving = plan.settings.halving.enabled;
  std::vector<int64_t> budgets{plan.trials.empty() ? 0 : plan.trials[0].max_steps};
  if (halving && !plan.trials.empty()) budgets = rung_budgets(plan.trials[0].max_steps, plan.settings.halving);
  std::vector<const Trial*> candidates;
  for (const auto& t : plan.trials) candidates.push_back(&t);
  const int last = static_cast<int>(budgets.size()) - 1;
  for (int k = 0; k <= last; ++k) {
    st.rung = k;
    st.steps = budgets[static_cast<size_t>(k)];
    st.trials = halving && k < last ? with_rung_seeds(candidates, plan.settings.halving.rung_seeds) : candidates;
    st.work.clear();
    std::map<std::string, GroupScore> scores;
    std::map<std::string, std::pair<double, int>> sums;
    for (const Trial* t : st.trials) {
      const std::string rd = run_dir(dir, *t, k, halving);
      const RunInspection ins = inspect_run(rd);
      if (needs_run(ins, retry)) st.work.push_back(t);
      GroupScore& g = scores[t->group];
      g.group = t->group;
      g.baseline = t->baseline;
      if (ins.state == RunState::Failed) {
        g.failed = true;
      } else if (ins.state == RunState::Completed) {
        auto r = read_run_result((fs::path(rd) / "run.h5").string());
        sums[t->group].first += r.final_val_loss();
        sums[t->group].second += 1;
        g.by_seed[t->seed] = r.final_val_loss();
      }
    }
    if (!st.work.empty() || k == last) {
      st.finished = st.work.empty();
      return st;
    }
    // The rung is complete: decide who goes on.
    std::vector<GroupScore> list;
    for (auto& [name, g] : scores) {
      const auto& s = sums[name];
      g.val_loss = g.failed || s.second == 0 ? std::numeric_limits<double>::infinity() : s.first / s.second;
      list.push_back(g);
    }
    auto decided = promote(list, k, budgets[static_cast<size_t>(k)], plan.settings.halving);
    std::set<std::string> promoted;
    for (const auto& d : decided)
      if (d.promoted) promoted.insert(d.group);
    st.decisions.insert(st.decisions.end(), decided.begin(), decided.end());
    std::vector<const Trial*> next;
    for (const Trial* t : candidates)
      if (promoted.count(t->group)) next.push_back(t);
    candidates = next;
  }
  st.finished = true;
  return st;
}

std::vector<TrialRun> stage_runs(const SweepPlan& plan, const std::string& dir, const SweepStage& stage,
                                 bool only_work) {
  const bool halving = plan.settings.halving.enabled;
  std::vector<TrialRun> runs;
  for (const Trial* t : only_work ? stage.work : stage.trials) {
    TrialRun r;
    r.trial = t;
    r.rung = stage.rung;
    r.steps = halving ? stage.steps : t->max_steps;
    r.dir = run_dir(dir, *t, stage.rung, halving);
    r.config = halving ? rung_config(*t, r.steps) : t->config;
    r.label = halving ? fmt::format("{} @ rung {} ({} steps)", t->name, stage.rung, r.steps) : t->name;
    runs.push_back(std::move(r));
  }
  return runs;
}

SweepSummary collect_sweep(const SweepPlan& plan, const std::string& dir) {
  SweepSummary s;
  s.decisions = sweep_stage(plan, dir, RetryPolicy::None).decisions;
  s.outcomes = collect_outcomes(plan, dir, s.decisions);
  s.ranking = rank_configurations(plan, s.outcomes);
  write_index(plan, dir, s.outcomes, s.ranking, s.decisions);
  s.table = format_ranking(plan, s.ranking, s.outcomes);
  for (const auto& o : s.outcomes) s.tokens_trained += o.tokens_all;
  for (const auto& t : plan.trials) s.tokens_full_grid += t.max_steps * t.step_tokens;
  bool failed = false, unfinished = false;
  for (const auto& o : s.outcomes) {
    failed = failed || o.status == "failed";
    unfinished = unfinished || (o.status != "completed" && o.status != "pruned" && o.status != "failed");
  }
  s.exit_code = failed ? 1 : unfinished ? 130 : 0;
  return s;
}

std::string describe_halving(const SweepPlan& plan, const SweepSummary& s) {
  if (!plan.settings.halving.enabled || plan.trials.empty()) return "";
  const auto budgets = rung_budgets(plan.trials[0].max_steps, plan.settings.halving);
  std::string out = fmt::format("successive halving (eta {}): rungs at {} steps\n", plan.settings.halving.eta,
                                fmt::join(budgets, ", "));
  std::map<int, std::vector<const PromotionDecision*>> by_rung;
  for (const auto& d : s.decisions) by_rung[d.rung].push_back(&d);
  for (const auto& [rung, ds] : by_rung) {
    std::vector<std::string> kept, pruned;
    for (const auto* d : ds)
      (d->promoted ? kept : pruned)
          .push_back(fmt::format("{} {:.4f}{}", d->group, d->val_loss, d->reason == "baseline" ? " (baseline)" : ""));
    out += fmt::format("  rung {} ({} steps): promoted {} of {}: {}\n", rung, ds.front()->steps, kept.size(), ds.size(),
                       fmt::join(kept, ", "));
    if (!pruned.empty()) out += fmt::format("    stopped: {}\n", fmt::join(pruned, ", "));
  }
  if (s.tokens_full_grid > 0)
    out += fmt::format("  trained {} tokens, {:.0f}% of the full grid's {} ({} trials x {} steps)\n",
                       format_count(static_cast<double>(s.tokens_trained)),
                       100.0 * static_cast<double>(s.tokens_trained) / static_cast<double>(s.tokens_full_grid),
                       format_count(static_cast<double>(s.tokens_full_grid)), plan.trials.size(),
                       plan.trials[0].max_steps);
  return out;
}

SweepSummary run_sweep(const SweepPlan& plan, const SweepOptions& o) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
    else std::cout << s << std::endl;
  };
  fs::create_directories(o.dir);
  SweepLock lock = SweepLock::acquire((fs::path(o.dir) / "sweep.lock").string(), SweepLock::Mode::Exclusive, 0,
                                      "running the sweep");
  const std::string change = prepare_sweep_dir(o.dir, plan, o.force, /*allow_growth=*/true).message();
  if (!change.empty()) log(change);

  LaunchOptions lo;
  lo.prism = o.prism;
  lo.jobs = o.jobs > 0 ? o.jobs : plan.settings.jobs;
  lo.threads = threads_per_trial(o.threads > 0 ? o.threads : plan.settings.threads, lo.jobs);
  lo.timeout_s = o.timeout_s >= 0 ? o.timeout_s : plan.settings.timeout_s;
  lo.retry = o.retry;
  lo.log = log;
  lo.on_finished = [&](const TrialRun&) {
    try {
      collect_sweep(plan, o.dir);  // the index stays current while the sweep runs
    } catch (const Error& e) {
      log(fmt::format("warning: could not refresh the index: {}", e.what()));
    }
  };
  log(fmt::format("sweep {}: {} trials in {}, {} at a time, {} thread{} each{}", plan.settings.name, plan.trials.size(),
                  o.dir, lo.jobs, lo.threads, lo.threads == 1 ? "" : "s",
                  lo.timeout_s > 0 ? fmt::format(", timeout {:.0f} s per run", lo.timeout_s) : ""));

  bool stopped = false, launched = false;
  size_t decisions_shown = 0;
  while (true) {
    SweepStage stage = sweep_stage(plan, o.dir, lo.retry);
    for (; decisions_shown < stage.decisions.size(); ++decisions_shown) {
      const auto& d = stage.decisions[decisions_shown];
      log(fmt::format("halving rung {} ({} steps): {:<3} {} val loss {:.4f} -> {}", d.rung, d.steps,
                      fmt::format("#{}", d.rank), d.group, d.val_loss, d.promoted ? "promoted (" + d.reason + ")" : d.reason));
    }
    if (stage.finished && launched) break;
    if (plan.settings.halving.enabled)
      log(fmt::format("halving rung {}: {} configuration runs at {} steps", stage.rung, stage.trials.size(), stage.steps));
    // A finished stage still goes through the launcher once: it says what it skips and why.
    const auto report = launch_local(stage_runs(plan, o.dir, stage, false), lo);
    launched = true;
    lo.retry = RetryPolicy::None;  // a retry is one more attempt, not a loop
    if (stage.finished) break;
    if (report.stopped) {
      stopped = true;
      break;
    }
    if (report.completed + report.failed + report.interrupted == 0) break;  // nothing could run
  }
  SweepSummary s = collect_sweep(plan, o.dir);
  if (stopped) s.exit_code = 130;
  return s;
}

}  // namespace prism
