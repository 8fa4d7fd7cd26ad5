#include "prism/config/schedule_section.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

#include "prism/error.h"

namespace prism {

namespace {

const char* const kHeadsFix = "write e.g. heads: [3,3,3,6,6,6,12,12,12,12,12,12] or heads: 3x3,6x3,12x6";
const char* const kForms[] = {"heads", "uniform", "staircase"};

// An error from a schedule's own parts names them after the config key.
Error at_key(const Error& e, const std::string& where) {
  return Error(e.what_part(), where + " (" + e.where() + ")", e.fix());
}

// Rule 4's block lengths as `block: [min, max]` or `block: length`.
void parse_block(ConfigNode& n, ScheduleRules& r) {
  const YAML::Node block = n.raw("block");
  auto bad = [&] {
    return Error(fmt::format("'{}' must be [min, max] or one length, each in [1, 1024]", n.key_path("block")),
                 n.where("block"), "write e.g. block: [2, 4]");
  };
  if (n.has("block_min") || n.has("block_max"))
    throw Error(fmt::format("the block lengths are given twice: {} and {}_min/_max", n.key_path("block"),
                            n.key_path("block")),
                n.where("block"), "keep one spelling: block: [min, max], or block_min and block_max");
  std::vector<int> v;
  if (block.IsScalar()) v.assign(2, n.get<int>("block", 0));
  else if (block.IsSequence() && block.size() == 2) v = n.get<std::vector<int>>("block", {});
  else throw bad();
  if (v[0] < 1 || v[0] > 1024 || v[1] < 1 || v[1] > 1024) throw bad();
  r.block_min = v[0];
  r.block_max = v[1];
}

// Exactly one form, or none.
void check_one_form(const ConfigNode& n) {
  std::vector<std::string> given;
  for (const char* f : kForms)
    if (n.has(f)) given.push_back(fmt::format("schedule.{} (from {})", f, n.origin(f)));
  if (given.size() > 1)
    throw Error(fmt::format("the schedule is given in more than one form: {}", fmt::join(given, " and ")),
                n.source() + " key schedule",
                "keep exactly one form; on the command line, drop the other with e.g. ~schedule.staircase");
}

// The schedule the section's form gives.
HeadSchedule parse_form(ConfigNode& n, const ModelConfig& model) {
  check_one_form(n);
  const std::string where = n.source() + " key schedule";
  const bool has_heads = n.has("heads"), has_uniform = n.has("uniform"), has_stairs = n.has("staircase");
  const YAML::Node heads = n.raw("heads"), uniform = n.raw("uniform"), stairs = n.raw("staircase");
  if (has_heads) return parse_heads(heads, n.where("heads"));
  try {
    if (has_uniform) return HeadSchedule::uniform(model.n_layer, uniform.as<int>());
    if (has_stairs) return HeadSchedule::from_staircase(parse_staircase(stairs, n.where("staircase")), model.d_model);
  } catch (const YAML::Exception&) {
    throw Error("head counts must be integers", where, kHeadsFix);
  } catch (const Error& e) {
    if (e.where().rfind(n.source(), 0) == 0) throw;
    throw at_key(e, where);
  }
  return HeadSchedule::uniform(model.n_layer, model.n_head);
}

}  // namespace

HeadSchedule parse_heads(const YAML::Node& value, const std::string& where) {
  try {
    if (value.IsSequence()) return HeadSchedule(value.as<std::vector<int>>());
    if (value.IsScalar()) return HeadSchedule::parse(value.Scalar());
  } catch (const YAML::Exception&) {
    throw Error("head counts must be integers", where, kHeadsFix);
  } catch (const Error& e) {
    throw at_key(e, where);
  }
  throw Error("a schedule must be a list of head counts or a compact form", where, kHeadsFix);
}

std::vector<Stair> parse_staircase(const YAML::Node& n, const std::string& where) {
  auto bad = [&]() {
    return Error("schedule.staircase must be a list of [head_dim, layers] pairs, or text like \"256:3,128:3,64:6\"",
                 where, "write e.g. staircase: [[256, 3], [128, 3], [64, 6]]");
  };
  std::vector<Stair> stairs;
  try {
    if (n.IsScalar()) {
      std::stringstream ss(n.Scalar());
      for (std::string item; std::getline(ss, item, ',');) {
        auto colon = item.find(':');
        if (colon == std::string::npos) throw bad();
        stairs.push_back({std::stoi(item.substr(0, colon)), std::stoi(item.substr(colon + 1))});
      }
    } else if (n.IsSequence()) {
      for (const auto& step : n) {
        if (!step.IsSequence() || step.size() != 2) throw bad();
        stairs.push_back({step[0].as<int>(), step[1].as<int>()});
      }
    } else {
      throw bad();
    }
  } catch (const YAML::Exception&) {
    throw bad();
  } catch (const std::logic_error&) {  // stoi
    throw bad();
  }
  return stairs;
}

ScheduleRules parse_schedule_rules(ConfigNode& n) {
  ScheduleRules r;
  r.strict = n.get<bool>("strict", false);
  r.hard = n.get<bool>("hard_rules", true);
  if (n.has("block")) parse_block(n, r);
  else n.raw("block");  // a known key, unset
  r.block_min = static_cast<int>(n.get_int("block_min", r.block_min, 1, 1024));
  r.block_max = static_cast<int>(n.get_int("block_max", r.block_max, 1, 1024));
  r.baseline_share = n.get_real("baseline_share", r.baseline_share, 0.0, 1.0);
  return r;
}

ScheduleSection parse_schedule_section(ConfigNode n, const ModelConfig& model, const std::optional<HeadSchedule>& chosen) {
  ScheduleSection out;
  out.rules = parse_schedule_rules(n);
  if (chosen) {
    for (const char* f : kForms) n.raw(f);  // replaced by the chosen schedule
    out.schedule = *chosen;
  } else {
    out.schedule = parse_form(n, model);
  }
  n.finish();
  require_valid_schedule(out.schedule, model.n_layer, model.d_model, model.n_head, out.rules,
                         n.source() + " key schedule");
  return out;
}

EnumerationSpace parse_enumeration_section(ConfigNode n, const ModelConfig& model) {
  EnumerationSpace sp;
  sp.n_layer = model.n_layer;
  sp.d_model = model.d_model;
  sp.h_base = model.n_head;
  sp.head_dims = n.get<std::vector<int>>("head_dims", {});
  sp.rules = parse_schedule_rules(n);
  n.finish();
  return sp;
}

}  // namespace prism
