#pragma once
// Every progressive schedule of a model shape under the paper's rules: a
// staircase of wide head widths (each held block_min..block_max layers, widest
// first) followed by at least baseline_share * L layers at the baseline count.
#include <vector>

#include "prism/schedule/head_schedule.h"
#include "prism/schedule/rules.h"

namespace prism {

struct EnumerationSpace {
  int n_layer = 12;
  int d_model = 768;
  int h_base = 12;
  // Wide head widths the early stages may use; empty = the powers of two
  // above d_model / h_base that divide d_model, up to 256.
  std::vector<int> head_dims;
  ScheduleRules rules;           // block lengths and baseline share
  bool include_uniform = true;   // the baseline itself, listed first
};

// The head widths used when EnumerationSpace::head_dims is empty.
std::vector<int> default_wide_head_dims(int d_model, int h_base);

// Deterministic order: the uniform schedule first; then by the set of head
// widths used (fewer stages first, subsets in the order of head_dims sorted
// widest first), then by stage lengths lexicographically. Schedules breaking a
// hard rule, or a guideline when rules.strict, are left out.
std::vector<HeadSchedule> enumerate_schedules(const EnumerationSpace& space);

}  // namespace prism
