#pragma once
// The numbers behind search_evidence.h, shared by its three files: the inputs read
// (search_evidence_inputs.cpp), the judgement computed from them (search_evidence.cpp)
// and their rendering (search_evidence_markdown.cpp). Internal to the evidence.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "prism/analysis/search_evidence.h"
#include "prism/stats/stats.h"

namespace prism {

struct Config;
struct SearchPlan;

namespace evidence {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Heads = std::vector<int>;
using LossBySeed = std::map<uint64_t, double>;

std::string label(const Heads& h);  // "32x2"

// Final validation losses by schedule and seed, from a sweep directory's summary.csv (completed
// runs at their trial's full budget; the first of duplicates kept).
struct Runs {
  std::map<Heads, LossBySeed> loss;
  double tokens_all_rungs = 0;  // the compute every trial of the sweep consumed
};
Runs read_sweep(const std::string& dir);

struct Paired {
  double diff = kNaN;
  Interval ci{kNaN, kNaN};
  size_t seeds = 0;
};
// Mean over common seeds of a - b, with its Student-t interval.
Paired paired(const LossBySeed& a, const LossBySeed& b, double confidence);
bool contains_zero(const Interval& i);
double mean_loss(const LossBySeed& by_seed);

struct GroundTruth {
  std::vector<Heads> schedules;            // by mean, best first
  std::map<Heads, double> mean;
  std::map<Heads, LossBySeed> loss;        // on the seeds every schedule has
  std::map<Heads, Paired> vs_best;
  std::set<Heads> band;
  // The schedules rules 1-3 allow at the ground truth's model (h_base = its model.n_head), and the
  // best of them: what a decoded pick can reach when the best schedule breaks a rule.
  std::set<Heads> allowed;
  Heads best_allowed;                      // empty when rules 1-3 allow none
  std::vector<uint64_t> seeds;             // every schedule's
  // How well one seed's ranking agrees with the others': per seed, Kendall tau between its
  // losses and the mean of the other seeds' over the schedules. The ceiling a search's tau
  // against the ground truth's means can be read against.
  std::vector<double> seed_tau;
  double run_flops = 0;                    // one run of it
  double flops_per_token = 0;
  const Heads& best() const { return schedules.front(); }
  double grid_flops() const { return static_cast<double>(schedules.size() * seeds.size()) * run_flops; }
};
GroundTruth read_ground_truth(const std::string& dir, double confidence, std::vector<std::string>& notes);

struct RankedRow {
  Heads heads;
  double loss = kNaN, estimate = kNaN;
  bool hard_rules = false;
};
std::vector<RankedRow> read_ranking(const std::string& dir);

// A search's second ranking: the sweep that fine-tuned its ranked schedules from the shared weights
// (`prism sweep RUN/finetune.yaml --out RUN/finetune`), best first. Under successive halving the
// schedules that reached the last rung come first, by their loss there, then each earlier rung's.
struct FinetuneRanking {
  std::vector<Heads> order;
  std::map<Heads, double> loss;      // at the last rung each reached
  double tokens = 0;                 // every run's training tokens, every rung
  int64_t evaluations = 0;           // held-out evaluations: one per run, every rung
  std::string describe;              // "36 x 150 steps" or "36 x 150 steps, then the best 12 x 450"
  std::string recipe;                // the same, short, for the method's name: "36 at 150, 12 at 450 steps"
};
std::optional<FinetuneRanking> read_finetune(const std::string& search_dir);

// A search as its run was costed: its vocabulary from the run's config.yaml.
SearchPlan search_plan_of(const std::string& dir);
// Says so when a cost rests on the preset's vocabulary because the data is not there.
void note_vocabulary(const std::string& what, const Config& c, std::vector<std::string>& notes);

struct SearchResult {
  std::string dir, method, ranking = "shared weights";
  uint64_t seed = 0;
  double tau = kNaN, tau_shared = kNaN, tau_estimate = kNaN;  // tau of the ranking judged, of the shared weights' loss
  size_t ranked_gt = 0;
  Heads pick;
  Paired pick_vs_best, pick_vs_allowed;  // against the best schedule, and the best rules 1-3 allow
  bool pick_in_gt = false, pick_trained = false, in_band = false, in_allowed_band = false;
  double search_share = kNaN, total_share = kNaN, budget_runs = kNaN;
};

// The searches of one method, together.
struct MethodSummary {
  std::string method;
  size_t searches = 0;
  double tau_mean = kNaN;
  Interval tau_ci{kNaN, kNaN};
  int64_t in_band = 0, trained = 0, in_allowed_band = 0;
  double share = kNaN, budget_runs = kNaN;
  int64_t picks_best = 0;            // picks that are the ground truth's best
  double regret = kNaN;              // mean over searches of the pick's paired difference to the best
  Interval regret_ci{kNaN, kNaN};
  size_t regret_n = 0;               // searches whose pick was trained from scratch
};

// A baseline at a method's compute. A from-scratch baseline (a grid of k seeds per schedule over the
// ground truth's schedules, or a random subset of them where the budget does not reach all) is judged
// over every equally likely draw of its schedules and seeds (or a fixed-seed sample of them where they
// are too many): the share of draws whose pick is the best and in the top band, its regret (the pick's
// mean minus the best's, over the ground truth's seeds) and tau (its k-seed means against the means of
// the ground truth's other seeds, so that no seed is judged by itself), each with the central 95% of draws.
struct Baseline {
  std::string name;
  double budget_runs = kNaN, share = kNaN, in_band = kNaN, regret = kNaN;
  bool whole_runs = false;  // the budget is a count of runs, not a share of them
  int64_t seeds_per_schedule = 0, schedules = 0, draws = 0;
  bool sampled = false;     // draws sampled (fixed seed) rather than every one
  double p_best = kNaN, regret_lo = kNaN, regret_hi = kNaN, tau = kNaN, tau_lo = kNaN, tau_hi = kNaN;
};
// From-scratch baselines at `budget_runs` (the budget of `methods`, named in each row): k = 1, 2, ... 5
// seeds per schedule while a draw keeps 2 schedules and a held-out seed.
std::vector<Baseline> from_scratch_baselines(const GroundTruth& g, double budget_runs, const std::string& methods);

struct EvidenceData {
  GroundTruth g;
  std::vector<SearchResult> searches;
  std::vector<MethodSummary> methods;   // by method name
  std::vector<Baseline> baselines;
  std::vector<std::string> notes;
};


// The markdown of evidence.md.
std::string render_evidence(const EvidenceData& d, const EvidenceOptions& o);

// Formatting shared by the tables' renderings: "-" for a missing number.
std::string num(double v, const char* f = "{:.4f}");
std::string interval(const Interval& i, const char* f = "{:+.4f}");

}  // namespace evidence
}  // namespace prism
