#pragma once
// Does a search find what a grid finds? The evidence a schedule search is judged
// by, from a ground truth (a sweep that trained schedules from scratch with
// paired seeds) and independent searches that ranked the same schedules:
//   - the ground truth: each schedule's mean final validation loss over its
//     seeds; its difference to the best schedule paired by seed (same initial
//     weights and data order), with a Student-t interval; the top band: the
//     schedules whose interval against the best contains 0 (the best included);
//     the spread (worst mean - best mean) against the paired half-width of worst
//     vs best;
//   - each search: Kendall's tau-b between its ranking and the ground truth's
//     means, over the ground truth's schedules. The ranking is the search's
//     fine-tuned one where it has one (RUN/finetune: the sweep finetune.yaml
//     writes, each schedule trained briefly from the shared weights; under
//     successive halving the last rung's schedules first), its held-out loss
//     under the shared weights otherwise; tau of the shared weights' loss, and
//     for a mixture of its architecture estimate, are reported beside it. The
//     fine-tuning's compute is what its summary.csv says it trained. Its pick (the best
//     it evaluated, under rules 1-3 or unconstrained), trained from scratch with
//     the ground truth's seeds (a ground-truth trial when the pick is one of its
//     schedules: same config and seed, the same run), and whether it falls in
//     the top band; its compute (search.h's cost model) and that of retraining
//     the pick, as a share of the ground-truth grid's;
//   - the interval of tau over the searches of each method, and the targets
//     (EvidenceTargets: from the command line) met or missed;
//   - baselines at the same compute as a search plus retraining: random search
//     (b schedules of the ground truth, b the budget in whole runs, one seed
//     each, the best by its loss; exact over every subset and seed) and
//     successive halving (sweeps over the ground truth's schedules).
// Computed first (search_evidence.cpp, its inputs read by search_evidence_inputs.cpp),
// then rendered (search_evidence_markdown.cpp): the tables are the numbers, the
// markdown only formats them.
#include <string>
#include <vector>

#include "prism/store/table.h"

namespace prism {

// What a search method must reach to be called better than a grid (README.md's targets).
struct EvidenceTargets {
  double tau = 0.6;          // mean Kendall tau against the ground truth, at least
  double band = 2.0 / 3.0;   // share of searches whose pick is in the top band, at least
  double share = 0.25;       // search + retraining as a share of the grid's compute, at most
  double spread = 5;         // the ground truth's spread over its paired half-width, at least
};

struct EvidenceOptions {
  std::string ground_truth;              // sweep directory (summary.csv)
  std::vector<std::string> searches;     // prism search run directories
  std::vector<std::string> retrained;    // sweep directories with picks outside the ground truth, trained from scratch
  std::vector<std::string> halving;      // successive-halving sweep directories over the ground truth's schedules
  std::string pick = "unconstrained";    // which pick is retrained: decoded (rules 1-3) | unconstrained
  // Which ranking of a search is judged: finetuned (its fine-tuned ranking, RUN/finetune/summary.csv,
  // where it has one; else its shared-weights ranking.csv) | shared (ranking.csv always).
  std::string ranking = "finetuned";
  double confidence = 0.95;
  EvidenceTargets targets;
};

struct Evidence {
  Table ground_truth;   // per schedule: seeds, mean, paired difference to the best and its interval, top band
  Table searches;       // per search: method, seed, tau, pick, pick's paired difference and band, compute shares
  Table methods;        // per method: tau's mean and interval over searches, picks in band, compute
  Table baselines;      // random search and halving at the same compute
  std::string markdown; // the tables with the four targets, met or missed, and by how much
  std::vector<std::string> notes;
};

// Throws prism::Error naming the directory and the fix for missing or unusable input.
Evidence evaluate_search(const EvidenceOptions& options);

// Writes report.md's tables as CSVs (ground_truth.csv, searches.csv, methods.csv,
// baselines.csv) and the markdown as evidence.md into `dir`.
void write_evidence(const Evidence& e, const std::string& dir);

}  // namespace prism
