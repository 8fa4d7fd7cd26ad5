#include "prism/config/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>

#include "prism/config/attention_backend.h"
#include "prism/config/compose.h"
#include "prism/config/schedule_section.h"
#include "prism/error.h"

namespace prism {

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open config file", path, "check the path (configs live under experiments/)");
  try {
    YAML::Node n = YAML::Load(in);
    if (!n || n.IsNull()) return YAML::Node(YAML::NodeType::Map);
    return n;
  } catch (const YAML::ParserException& e) {
    throw Error(fmt::format("YAML syntax error: {}", e.msg), fmt::format("{}:{}:{}", path, e.mark.line + 1, e.mark.column + 1),
                "fix the YAML at that line (indentation, a missing ':' or an unclosed bracket)");
  }
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  apply_key_override(root, parse_override(assignment));
}

ModelConfig parse_model_section(ConfigNode n) {
  ModelConfig m;
  if (auto preset = n.maybe<std::string>("preset")) {
    try {
      m = model_preset(*preset);
    } catch (const Error& e) {
      throw Error(e.what_part(), n.where("preset"), e.fix());
    }
  }
  m.n_layer = static_cast<int>(n.get_int("n_layer", m.n_layer, 1, 1024));
  m.d_model = static_cast<int>(n.get_int("d_model", m.d_model, 1, 1 << 16));
  m.n_head = static_cast<int>(n.get_int("n_head", m.n_head, 1, 1 << 16));
  m.block_size = static_cast<int>(n.get_int("block_size", m.block_size, 1, 1 << 20));
  if (n.maybe<std::string>("vocab_size") == std::optional<std::string>("auto")) {
    m.vocab_from_data = true;
  } else if (n.has("vocab_size")) {
    m.vocab_size = static_cast<int>(n.get_int("vocab_size", m.vocab_size, 1, 1 << 24));
    m.vocab_from_data = false;
  }
  m.bias = n.get<bool>("bias", m.bias);
  m.dropout = n.get_real("dropout", m.dropout, 0.0, 0.999);
  m.position = n.get_choice("position", positions_name(m.position), {"learned", "rope"}) == "rope" ? Positions::Rope
                                                                                                 : Positions::Learned;
  m.rope_theta = n.get_real("rope_theta", m.rope_theta, 1.0, 1e12);  // theta <= 1: no frequency below one turn per token
  n.finish();
  if (m.d_model % m.n_head != 0)
    throw Error(fmt::format("model.n_head = {} does not divide model.d_model = {}", m.n_head, m.d_model),
                n.where("n_head"), "choose a baseline head count that divides d_model");
  return m;
}

Config parse_config(const YAML::Node& root, const std::string& source, std::shared_ptr<const KeyOrigins> origins,
                    const std::optional<HeadSchedule>& schedule) {
  ConfigNode top(root, source, {}, std::move(origins));
  Config c;
  c.source = source;
  c.resolved = YAML::Clone(root);
  c.model = parse_model_section(top.child("model"));
  ScheduleSection section = parse_schedule_section(top.child("schedule"), c.model, schedule);
  c.schedule = std::move(section.schedule);
  c.rules = section.rules;
  c.schedule_warnings = check_schedule(c.schedule, c.model.n_layer, c.model.d_model, c.model.n_head, c.rules).warnings();
  require_rope_head_widths(c.model, c.schedule.heads(), source + " key schedule.heads");
  ConfigNode att = top.child("attention");
  c.attention.backend = att.get_choice("backend", "auto", attention::backend_names());
  att.finish();
  c.train = parse_train_section(top.child("train"));
  c.data = parse_data_section(top.child("data"));
  if (c.train.seq_len == 0) c.train.seq_len = c.model.block_size;
  check_tokens_per_step(c.train, source + " key train.tokens_per_step");
  if (c.train.seq_len > c.model.block_size)
    throw Error(fmt::format("train.seq_len = {} exceeds model.block_size = {}", c.train.seq_len, c.model.block_size),
                source + " key train.seq_len", fmt::format("use train.seq_len <= {} or raise model.block_size", c.model.block_size));
  top.finish();
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides, SweepSection sweep) {
  ComposedConfig composed = compose_config(path, overrides);
  if (composed.root["sweep"]) {
    if (sweep == SweepSection::Refuse)
      throw Error("this is a sweep file (it has a `sweep:` section), not one run's config", composed.source,
                  fmt::format("run it with `prism sweep {}` (--dry-run lists its trials), or give a config without `sweep:`",
                              composed.source));
    composed.root.remove("sweep");
  }
  return parse_config(composed.root, overrides.empty() ? composed.source : composed.source + " (with overrides)",
                      composed.origins);
}

std::string to_yaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  if (!c.model.preset.empty()) out << YAML::Key << "preset" << YAML::Value << c.model.preset;
  out << YAML::Key << "n_layer" << YAML::Value << c.model.n_layer;
  out << YAML::Key << "d_model" << YAML::Value << c.model.d_model;
  out << YAML::Key << "n_head" << YAML::Value << c.model.n_head;
  out << YAML::Key << "block_size" << YAML::Value << c.model.block_size;
  if (c.model.vocab_from_data) out << YAML::Key << "vocab_size" << YAML::Value << "auto";
  else out << YAML::Key << "vocab_size" << YAML::Value << c.model.vocab_size;
  out << YAML::Key << "bias" << YAML::Value << c.model.bias;
  out << YAML::Key << "dropout" << YAML::Value << c.model.dropout;
  // Written for rotary models only: a learned-position config reads as it did before positions had a choice.
  if (c.model.position != Positions::Learned) {
    out << YAML::Key << "position" << YAML::Value << positions_name(c.model.position);
    out << YAML::Key << "rope_theta" << YAML::Value << c.model.rope_theta;
  }
  out << YAML::EndMap;
  out << YAML::Key << "schedule" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "heads" << YAML::Value << YAML::Flow << c.schedule.heads();
  out << YAML::Key << "strict" << YAML::Value << c.rules.strict;
  out << YAML::Key << "block_min" << YAML::Value << c.rules.block_min;
  out << YAML::Key << "block_max" << YAML::Value << c.rules.block_max;
  out << YAML::Key << "baseline_share" << YAML::Value << c.rules.baseline_share;
  // Written only when relaxed, so the resolved text of every other config is as before.
  if (!c.rules.hard) out << YAML::Key << "hard_rules" << YAML::Value << false;
  out << YAML::EndMap;
  out << YAML::Key << "attention" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "backend" << YAML::Value << c.attention.backend;
  out << YAML::EndMap;
  const TrainConfig& t = c.train;
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "seed" << YAML::Value << t.seed << YAML::Key << "device" << YAML::Value << t.device
      << YAML::Key << "threads" << YAML::Value << t.threads << YAML::Key << "batch_size" << YAML::Value << t.batch_size
      << YAML::Key << "seq_len" << YAML::Value << t.seq_len << YAML::Key << "tokens_per_step" << YAML::Value
      << t.tokens_per_step << YAML::Key << "max_steps" << YAML::Value << t.max_steps << YAML::Key << "lr"
      << YAML::Value << t.lr << YAML::Key << "min_lr_ratio" << YAML::Value << t.min_lr_ratio << YAML::Key
      << "warmup_steps" << YAML::Value << t.warmup_steps << YAML::Key << "decay" << YAML::Value << t.decay
      << YAML::Key << "weight_decay" << YAML::Value << t.weight_decay << YAML::Key << "beta1" << YAML::Value
      << t.beta1 << YAML::Key << "beta2" << YAML::Value << t.beta2 << YAML::Key << "eps" << YAML::Value << t.eps
      << YAML::Key << "grad_clip" << YAML::Value << t.grad_clip << YAML::Key << "dtype" << YAML::Value << t.dtype
      << YAML::Key << "log_every" << YAML::Value << t.log_every << YAML::Key << "eval_every" << YAML::Value
      << t.eval_every << YAML::Key << "eval_tokens" << YAML::Value << t.eval_tokens << YAML::Key << "distance_every"
      << YAML::Value << t.distance_every << YAML::Key << "distance_batch" << YAML::Value << t.distance_batch
      << YAML::Key << "checkpoint_every" << YAML::Value << t.checkpoint_every;
  // Written only when set: configs of runs made before the key existed read back the same.
  if (t.checkpoint_minutes > 0) out << YAML::Key << "checkpoint_minutes" << YAML::Value << t.checkpoint_minutes;
  if (!t.init_from.empty()) out << YAML::Key << "init_from" << YAML::Value << t.init_from;
  out << YAML::EndMap;
  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dir" << YAML::Value << c.data.dir << YAML::Key << "shuffle" << YAML::Value << c.data.shuffle;
  if (!c.data.vocab.empty()) out << YAML::Key << "vocab" << YAML::Value << c.data.vocab;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return out.c_str();
}

}  // namespace prism
