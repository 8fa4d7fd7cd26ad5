#pragma once
// The six schedule rules of PAPER.md. Rules 1-3 are hard constraints; 4-6 are
// design guidelines, reported as warnings unless `strict` makes them errors.
// A study of schedules outside the paper's space (a decreasing one, one that ends
// wide) turns rules 2-3 into warnings (`hard = false`); rule 1 always holds,
// since a model cannot split d_model into heads otherwise.
#include <string>
#include <vector>

#include "prism/schedule/head_schedule.h"

namespace prism {

enum class Rule {
  Divisibility = 1,        // h_l divides d_model
  Monotonicity = 2,        // h_1 <= ... <= h_L
  BoundaryConvergence = 3, // h_L = h_base
  StaircaseSmoothness = 4, // each non-baseline head width held for 2-4 consecutive layers
  BaselinePreservation = 5,// at least L/2 layers use h_base
  HardwareAlignment = 6,   // early (non-baseline) head widths are powers of two
};

struct ScheduleRules {
  int block_min = 2;              // rule 4
  int block_max = 4;              // rule 4
  double baseline_share = 0.5;    // rule 5: share of layers at h_base
  bool strict = false;            // guidelines 4-6 become errors
  bool hard = true;               // rules 2-3 are errors (false: warnings)
};

bool is_hard_rule(Rule r);
const char* rule_name(Rule r);

struct RuleFinding {
  Rule rule;
  int layer;  // 0-based, -1 for the whole schedule
  bool error; // hard rule, or a guideline under strict
  std::string message;
  std::string describe() const;  // "rule 2 (monotonicity), layer 4: ..."
};

struct ScheduleReport {
  std::vector<RuleFinding> findings;
  bool ok() const;              // no errors
  bool clean() const { return findings.empty(); }
  std::vector<RuleFinding> errors() const;
  std::vector<RuleFinding> warnings() const;
};

ScheduleReport check_schedule(const HeadSchedule& s, int n_layer, int d_model, int h_base,
                              const ScheduleRules& rules = {});

// Throws prism::Error naming the first error (layer and rule) with a fix.
void require_valid_schedule(const HeadSchedule& s, int n_layer, int d_model, int h_base,
                            const ScheduleRules& rules = {}, const std::string& where = "schedule");

// What a model needs to run a schedule, whatever the rules: `n_layer` counts,
// each dividing d_model (rule 1). Throws prism::Error naming the layer.
void require_runnable_schedule(const HeadSchedule& s, int n_layer, int d_model, const std::string& where = "schedule");

}  // namespace prism
