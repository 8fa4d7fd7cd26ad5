#pragma once
// ScheduleSpace: the schedules a weight-sharing search trains and ranks. Either
//   - a list: the schedules `schedule.enumerate` produces (the grid a sweep
//     would train one by one), or listed by hand; or
//   - a product: any of `choices` head counts in any layer (K^L schedules),
//     optionally only those obeying the paper's hard rules 2-3 (counts
//     non-decreasing, the last layer at the baseline). Rule 1 holds for every
//     choice, which must divide d_model.
// One model runs every schedule of a space exactly (the projections do not
// depend on the head count), so the search samples from it per micro-batch.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/schedule/head_schedule.h"

namespace prism {

// A counter-based random stream: the draw for (seed, step, slot) is a pure
// function of them, so a search's sampler needs no state beyond its seed to
// resume exactly or to agree across data-parallel ranks.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  SplitMix(uint64_t seed, uint64_t a, uint64_t b);  // a stream of its own for (seed, a, b)
  uint64_t next();
  double uniform();                  // [0, 1)
  uint64_t below(uint64_t n);        // [0, n), n > 0

 private:
  uint64_t state_;
};

class ScheduleSpace {
 public:
  // A product space: every layer chooses from `choices` (sorted, distinct); with
  // `hard_rules`, only schedules that are non-decreasing and end at `h_base`.
  static ScheduleSpace product(int layers, std::vector<int> choices, int h_base, bool hard_rules);
  // A list of schedules (duplicates dropped, order kept).
  static ScheduleSpace list(std::vector<HeadSchedule> schedules, int h_base);

  int layers() const { return layers_; }
  int h_base() const { return h_base_; }
  // The head counts layers choose from: a product's, or every count a listed schedule uses.
  const std::vector<int>& choices() const { return choices_; }
  int choice_index(int count) const;  // -1 if not a choice
  bool is_list() const { return !list_.empty(); }
  bool hard_rules() const { return hard_rules_; }
  const std::vector<HeadSchedule>& listed() const { return list_; }

  // Schedules in the space (a double: a product reaches 10^20 before a count would overflow).
  double size() const;
  bool contains(const HeadSchedule& s) const;
  // A schedule drawn uniformly from the space.
  HeadSchedule sample(SplitMix& rng) const;
  // Every schedule, in order (lexicographic by choice index for a product);
  // throws prism::Error above `limit`.
  std::vector<HeadSchedule> all(size_t limit) const;
  // "product of {1, 2, 4, 8} over 6 layers, non-decreasing, ending at 4: 84 schedules"
  std::string describe() const;

 private:
  int layers_ = 0, h_base_ = 0;
  std::vector<int> choices_;
  bool hard_rules_ = false;
  std::vector<HeadSchedule> list_;
  // Hard-rules product: completions_[l][k] = schedules of layers l.. that start at choice k.
  std::vector<std::vector<double>> completions_;
};

}  // namespace prism
