#include "prism/schedule/rules.h"

#include <fmt/format.h>

#include "prism/error.h"

namespace prism {

namespace {
bool is_power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }
}  // namespace

bool is_hard_rule(Rule r) { return static_cast<int>(r) <= 3; }

const char* rule_name(Rule r) {
  switch (r) {
    case Rule::Divisibility: return "divisibility";
    case Rule::Monotonicity: return "monotonicity";
    case Rule::BoundaryConvergence: return "boundary convergence";
    case Rule::StaircaseSmoothness: return "staircase smoothness";
    case Rule::BaselinePreservation: return "baseline preservation";
    case Rule::HardwareAlignment: return "hardware alignment";
  }
  return "?";
}

std::string RuleFinding::describe() const {
  std::string where = layer >= 0 ? fmt::format(", layer {}", layer) : "";
  return fmt::format("rule {} ({}){}: {}", static_cast<int>(rule), rule_name(rule), where, message);
}

bool ScheduleReport::ok() const {
  for (const auto& f : findings)
    if (f.error) return false;
  return true;
}

std::vector<RuleFinding> ScheduleReport::errors() const {
  std::vector<RuleFinding> out;
  for (const auto& f : findings)
    if (f.error) out.push_back(f);
  return out;
}

std::vector<RuleFinding> ScheduleReport::warnings() const {
  std::vector<RuleFinding> out;
  for (const auto& f : findings)
    if (!f.error) out.push_back(f);
  return out;
}

ScheduleReport check_schedule(const HeadSchedule& s, int n_layer, int d_model, int h_base,
                              const ScheduleRules& rules) {
  ScheduleReport rep;
  auto add = [&](Rule r, int layer, std::string msg) {
    const bool error = is_hard_rule(r) ? rules.hard || r == Rule::Divisibility : rules.strict;
    rep.findings.push_back({r, layer, error, std::move(msg)});
  };
  const auto& h = s.heads();
  const int L = s.n_layer();
  if (L != n_layer) {
    // Not one of the paper's rules, but nothing else is meaningful without it.
    rep.findings.push_back({Rule::Divisibility, -1, true,
                            fmt::format("the schedule has {} layers but the model has {}", L, n_layer)});
    return rep;
  }
  // Rule 1: divisibility.
  for (int l = 0; l < L; ++l) {
    if (h[l] <= 0 || d_model % h[l] != 0)
      add(Rule::Divisibility, l, fmt::format("{} heads do not divide d_model = {}", h[l], d_model));
  }
  // Rule 2: monotonicity.
  for (int l = 1; l < L; ++l) {
    if (h[l] < h[l - 1])
      add(Rule::Monotonicity, l, fmt::format("{} heads after {} in layer {}; counts must not decrease", h[l], h[l - 1], l - 1));
  }
  // Rule 3: boundary convergence.
  if (L > 0 && h[L - 1] != h_base)
    add(Rule::BoundaryConvergence, L - 1, fmt::format("the last layer has {} heads, the baseline is {}", h[L - 1], h_base));

  // Rule 4: each non-baseline stage lasts block_min..block_max layers.
  int layer = 0;
  for (auto [heads, len] : s.runs()) {
    if (heads != h_base && (len < rules.block_min || len > rules.block_max))
      add(Rule::StaircaseSmoothness, layer,
          fmt::format("{} heads held for {} layer{}; hold each head width for {}-{} layers", heads, len,
                      len == 1 ? "" : "s", rules.block_min, rules.block_max));
    layer += len;
  }
  // Rule 5: baseline preservation.
  int at_base = 0;
  for (int v : h) at_base += v == h_base;
  if (at_base < rules.baseline_share * L)
    add(Rule::BaselinePreservation, -1,
        fmt::format("{} of {} layers use the baseline {} heads; at least {:g} should", at_base, L, h_base,
                    rules.baseline_share * L));
  // Rule 6: hardware alignment of the early (non-baseline) head widths.
  for (int l = 0; l < L; ++l) {
    if (h[l] == h_base || h[l] <= 0 || d_model % h[l] != 0) continue;
    int dh = d_model / h[l];
    if (!is_power_of_two(dh))
      add(Rule::HardwareAlignment, l, fmt::format("head width {} is not a power of two", dh));
  }
  return rep;
}

void require_valid_schedule(const HeadSchedule& s, int n_layer, int d_model, int h_base, const ScheduleRules& rules,
                            const std::string& where) {
  auto rep = check_schedule(s, n_layer, d_model, h_base, rules);
  auto errs = rep.errors();
  if (errs.empty()) return;
  const RuleFinding& f = errs.front();
  std::string fix;
  switch (f.rule) {
    case Rule::Divisibility:
      fix = f.layer < 0 ? fmt::format("give exactly {} head counts", n_layer)
                        : fmt::format("use a head count that divides {}", d_model);
      break;
    case Rule::Monotonicity:
      fix = "make head counts non-decreasing from the first layer to the last (a study of other schedules: "
            "schedule.hard_rules: false)";
      break;
    case Rule::BoundaryConvergence:
      fix = fmt::format("end the schedule with {} heads (model.n_head; a study of other schedules: "
                        "schedule.hard_rules: false)", h_base);
      break;
    default: fix = "follow the guideline, or set schedule.strict: false to accept it with a warning"; break;
  }
  std::string more = errs.size() > 1 ? fmt::format(" (and {} more)", errs.size() - 1) : "";
  throw Error(f.describe() + more, fmt::format("{} {}", where, s.compact()), fix);
}

void require_runnable_schedule(const HeadSchedule& s, int n_layer, int d_model, const std::string& where) {
  if (s.n_layer() != n_layer)
    throw Error(fmt::format("the schedule has {} layers but the model has {}", s.n_layer(), n_layer),
                fmt::format("{} {}", where, s.compact()), fmt::format("give exactly {} head counts", n_layer));
  for (int l = 0; l < n_layer; ++l)
    if (s[l] <= 0 || d_model % s[l] != 0)
      throw Error(fmt::format("rule 1 (divisibility), layer {}: {} heads do not divide d_model = {}", l, s[l], d_model),
                  fmt::format("{} {}", where, s.compact()), fmt::format("use a head count that divides {}", d_model));
}

}  // namespace prism
