#pragma once
// Seeds until resolved, without p-hacking: a group-sequential design for the paired
// comparisons of a study (each schedule against uniform, paired by seed).
//
// The study looks at its results after `first` seed pairs, then after every `step` more,
// up to `cap`. Each comparison is tested at every look at one nominal level (a Pocock-type
// group-sequential design), chosen so that the chance of crossing it at ANY look is alpha/m
// when nothing differs (m comparisons: Bonferroni across them). That level comes from the
// null distribution of the sequence of paired t statistics, which depends on the pair
// counts alone (not on the sd): it is simulated (100,000 sequences, fixed seed) and its
// quantile taken at the conservative end of its 99% band. Equivalence within +-margin
// (two one-sided tests) gets its own level the same way: at a true difference of exactly
// +-margin the one-sided statistic is central t again. A verdict, once given, stands; the
// study stops when every comparison has one, or at cap. Any rule for stopping keeps the
// family-wise error at alpha: every look's test is counted in the level.
#include <cstdint>
#include <string>
#include <vector>

namespace prism {

struct SequentialDesign {
  int first = 3;        // seed pairs at the first look (2 at least)
  int step = 3;         // pairs added between looks (1 at least)
  int cap = 21;         // the most pairs; the last look is at cap
  double alpha = 0.05;  // family-wise error over every look and comparison
  double margin = 0;    // equivalence margin in nats; 0: no equivalence verdicts

  void check() const;  // throws prism::Error naming the bad field
  int looks() const;
  int pairs_at(int look) const;  // look 0, 1, ...: min(cap, first + look * step)
  // The look whose pair count is `pairs`, or -1 when no look has that count.
  int look_of(int pairs) const;
};

// The nominal per-look levels of the design for m comparisons: a look's two-sided paired
// t p-value below `difference` gives better/worse; its TOST p-value below `equivalence`
// gives equivalent.
struct SequentialLevels {
  double difference = 0;
  double equivalence = 0;
};
SequentialLevels sequential_levels(const SequentialDesign& d, int comparisons);

// Every look up to the one at `pairs` (a pair count of the design), in order: the
// verdicts after each ("" unresolved) of m = diffs.size() comparisons, each given as its
// paired differences (Prism - uniform) in seed order, the first pairs_at(look) used at a
// look. A verdict, once given, stands. The last entry is the study's state now.
std::vector<std::vector<std::string>> sequential_history(const SequentialDesign& d,
                                                          const std::vector<std::vector<double>>& diffs, int pairs);

// Operating characteristics by simulation: `sims` studies of m comparisons, each
// schedule's true difference `effect` (nats) from uniform, seed-to-seed noise such that
// a paired difference has sd `sd`, the comparisons sharing the uniform runs (so they
// correlate, 0.5, as in a real study).
struct SequentialSim {
  int sims = 0;
  double any_difference = 0;   // share of studies with a better/worse verdict
  double any_equivalent = 0;   // share with an equivalence verdict
  // Share of comparisons given the true verdict: the effect's direction where |effect| >=
  // margin (the design's power), "equivalent" where |effect| < margin.
  double correct_each = 0;
  double mean_pairs = 0;       // mean pairs used (at stopping)
  double stopped_early = 0;    // share of studies stopped before cap
};
SequentialSim simulate_sequential(const SequentialDesign& d, int comparisons, double effect, double sd, int sims,
                                  uint64_t seed);

}  // namespace prism
