#include "prism/config/overrides.h"

#include <fmt/format.h>

#include <cctype>

#include "prism/error.h"

namespace prism {

std::string Override::where() const { return fmt::format("{} override '{}'", source, text); }

Override parse_override(const std::string& text, const std::string& source) {
  Override o;
  o.text = text;
  o.source = source;
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("cannot read override '{}': {}", text, why), source,
                 "write key.path=value, +key=value (add), ++key=value (add or set), ~key (remove) or group=option");
  };
  std::string body = text;
  if (body.rfind("++", 0) == 0) {
    o.op = Override::Op::ForceSet;
    body = body.substr(2);
  } else if (body.rfind("+", 0) == 0) {
    o.op = Override::Op::Add;
    body = body.substr(1);
  } else if (body.rfind("~", 0) == 0) {
    o.op = Override::Op::Remove;
    body = body.substr(1);
  }
  const auto eq = body.find('=');
  o.key = trim(body.substr(0, eq));
  if (o.key.empty()) throw bad("no key");
  if (eq != std::string::npos) o.value = body.substr(eq + 1);
  if (o.op != Override::Op::Remove && !o.value) throw bad("no '=value'");
  for (char c : o.key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '/'))
      throw bad(fmt::format("'{}' is not a key path", o.key));
  split_key(o.key, source);
  if (o.value) {
    try {
      YAML::Load(*o.value);
    } catch (const YAML::Exception& e) {
      throw bad(fmt::format("the value is not YAML ({})", e.msg));
    }
  }
  return o;
}

std::vector<Override> parse_overrides(const std::vector<std::string>& texts, const std::string& source) {
  std::vector<Override> out;
  for (const auto& t : texts) out.push_back(parse_override(t, source));
  return out;
}

void apply_key_override(YAML::Node& root, const Override& o, KeyOrigins* origins) {
  const std::string where = o.where();
  auto fail = [&](const std::string& why) {
    return Error(fmt::format("cannot apply override '{}': {}", o.text, why), o.source,
                 "check the key path (dotted, e.g. train.lr) against the config (--print-config shows it)");
  };
  if (!root || !root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  const auto parts = split_key(o.key, o.source);
  YAML::Node existing = lookup_key(root, o.key);
  const bool present = existing.IsDefined() && !existing.IsNull();
  if (o.op == Override::Op::Remove && !present) {
    // A key the file writes with dots (sweep.grid's `schedule.enumerate: ...`) is one literal key of its map.
    for (size_t i = parts.size() - 1; i >= 1; --i) {
      std::string head = parts[0], tail = parts[i];
      for (size_t k = 1; k < i; ++k) head += "." + parts[k];
      for (size_t k = i + 1; k < parts.size(); ++k) tail += "." + parts[k];
      YAML::Node parent = lookup_key(root, head);
      const YAML::Node view = parent;
      if (parent.IsDefined() && parent.IsMap() && view[tail].IsDefined() && !o.value) {
        parent.remove(tail);
        forget_origins(origins, o.key);
        return;
      }
    }
  }
  if (o.op == Override::Op::Remove) {
    if (!present)
      throw Error(fmt::format("cannot remove '{}': it is not set", o.key), where, "drop the ~ override");
    if (o.value && YAML::Dump(existing) != YAML::Dump(YAML::Load(*o.value)))
      throw Error(fmt::format("cannot remove {}={}: its value is {}", o.key, *o.value, YAML::Dump(existing)), where,
                  fmt::format("write ~{} to remove whatever it holds", o.key));
    YAML::Node parent = parts.size() == 1 ? root : lookup_key(root, o.key.substr(0, o.key.rfind('.')));
    parent.remove(parts.back());
    forget_origins(origins, o.key);
    return;
  }
  if (o.op == Override::Op::Add && present) {
    const std::string from = origins && origins->count(o.key) ? origins->at(o.key) : "the config";
    throw Error(fmt::format("cannot add '{}': it is already set (by {})", o.key, from), where,
                fmt::format("change it with {}={} (without '+')", o.key, *o.value));
  }
  YAML::Node parent = ensure_map_path(root, parts, parts.size() - 1, fail);
  YAML::Node value = YAML::Load(*o.value);
  forget_origins(origins, o.key);
  parent[parts.back()] = value;
  remember_origins(origins, o.key, value, where);
}

}  // namespace prism
