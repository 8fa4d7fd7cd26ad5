#include "prism/config/compose.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "prism/config/config.h"
#include "prism/error.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

// Paths in messages: relative when under the working directory, else absolute.
std::string display_path(const fs::path& p) {
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec).lexically_normal();
  const fs::path cwd = fs::current_path(ec);
  const fs::path rel = abs.lexically_relative(cwd);
  if (!rel.empty() && *rel.begin() != "..") return rel.string();
  return abs.string();
}

// Deep merge: mappings merge key by key; anything else replaces what was there.
void merge_into(YAML::Node dst, const YAML::Node& src, const std::string& path, KeyOrigins* o,
                const std::string& file) {
  for (const auto& kv : src) {
    const std::string key = kv.first.Scalar();
    const std::string kp = join_key(path, key);
    YAML::Node existing = dst[key];
    if (existing.IsDefined() && existing.IsMap() && kv.second.IsMap()) {
      merge_into(existing, kv.second, kp, o, file);
      continue;
    }
    forget_origins(o, kp);
    dst[key] = YAML::Clone(kv.second);
    remember_file_origins(o, kp, kv.second, file);
  }
}

std::string package_header(const std::string& file) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const std::string t = trim(line);
    if (t.empty()) continue;
    if (t[0] != '#') break;
    const std::string c = trim(t.substr(1));
    if (c.rfind("@package", 0) == 0) return trim(c.substr(8));
  }
  return "";
}

std::vector<std::string> yaml_stems(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

// --- the defaults list -------------------------------------------------------

struct Entry {
  enum class Kind { Self, Group, File } kind = Kind::Self;
  std::string group;                   // absolute group path
  std::optional<std::string> option;   // nullopt: no option chosen (`group: null`)
  std::optional<std::string> package;  // from `group@pkg`
  bool is_override = false;            // `override group: option`
  std::string name;                    // Kind::File
  std::string where;                   // file:line of the entry
};

struct MergeItem {
  YAML::Node node;
  std::string package;  // "" = root
  std::string file;
};

class Composer {
 public:
  Composer(std::vector<std::string> roots, const std::vector<Override>& overrides) : roots_(std::move(roots)) {
    for (const auto& o : overrides) {
      if (is_group_override(o)) group_overrides_.push_back(o);
      else key_overrides_.push_back(o);
    }
    check_conflicts();
  }

  ComposedConfig run(const std::string& path, bool resolve) {
    // No primary file: the command line alone (`--model`, `model=cpu-128`), whose group
    // choices are then additions, as no defaults list chose anything to replace.
    const bool primary = !path.empty();
    out_.source = primary ? display_path(path) : std::string("command line");
    out_.origins = std::make_shared<KeyOrigins>();
    for (const auto& o : group_overrides_) {
      if (o.op == Override::Op::Add) continue;
      cli_choice_[o.key] = &o;
    }
    if (primary) expand(path, "", std::nullopt, /*primary=*/true);
    for (const auto& o : group_overrides_) {
      const bool set_or_add = o.op == Override::Op::ForceSet || (!primary && o.op == Override::Op::Set);
      const bool force_add = set_or_add && !used_.count(o.key);
      if (o.op != Override::Op::Add && !force_add) continue;
      if (o.op == Override::Op::Add && chosen_.count(o.key))
        throw Error(fmt::format("config group '{}' is already chosen (at {})", o.key, chosen_[o.key]), o.where(),
                    fmt::format("change the choice with {}={} (without '+')", o.key, *o.value));
      Entry e;
      e.kind = Entry::Kind::Group;
      e.group = o.key;
      e.option = *o.value;
      e.where = o.where();
      cli_choice_.erase(o.key);
      expand_group(e);
    }
    for (const auto& [group, o] : cli_choice_) {
      if (used_.count(group)) continue;
      if (o->op == Override::Op::Remove)
        throw Error(fmt::format("cannot remove config group '{}': it is not in the defaults list", group),
                    o->where(), "drop the ~ override");
      throw Error(fmt::format("config group '{}' is not in the defaults list of {}", group, out_.source),
                  o->where(), fmt::format("add it with +{}={}", group, o->value.value_or("<option>")));
    }
    for (const auto& [group, where] : file_overrides_)
      if (!used_.count(group))
        throw Error(fmt::format("`override {}` names a group no defaults list chose", group), where,
                    fmt::format("list it as `- {}: <option>` instead", group));

    out_.root = YAML::Node(YAML::NodeType::Map);
    for (const auto& item : items_) place(item);
    for (const auto& o : key_overrides_) apply_key_override(out_.root, o, out_.origins.get());
    if (resolve) resolve_interpolations(out_.root, out_.origins.get());
    return out_;
  }

 private:
  bool is_group_dir(const std::string& group) const {
    std::error_code ec;  // a name the file system refuses (too long, ...) is simply no group
    for (const auto& r : roots_)
      if (fs::is_directory(fs::path(r) / group, ec)) return true;
    return false;
  }

  // `model=cpu-256` chooses an option when `model` is a group folder; `model.x=1` is a key.
  bool is_group_override(const Override& o) const {
    if (o.key.find('.') != std::string::npos) return false;
    if (o.value && !YAML::Load(*o.value).IsScalar()) return false;
    return is_group_dir(o.key);
  }

  void check_conflicts() const {
    auto overlap = [](const std::string& a, const std::string& b) {
      return a == b || a.rfind(b + ".", 0) == 0 || b.rfind(a + ".", 0) == 0;
    };
    auto check = [&](const std::vector<Override>& list, const char* what) {
      for (size_t i = 0; i < list.size(); ++i)
        for (size_t j = i + 1; j < list.size(); ++j)
          if (overlap(list[i].key, list[j].key))
            throw Error(fmt::format("conflicting overrides '{}' and '{}' both change {} {}", list[i].text, list[j].text,
                                    what, list[i].key.size() <= list[j].key.size() ? list[i].key : list[j].key),
                        list[j].source, "give each key once");
    };
    check(key_overrides_, "key");
    check(group_overrides_, "config group");
  }

  // Groups known around the search path, for "use one of" messages.
  std::vector<std::string> known_groups() const {
    for (const auto& r : roots_) {
      std::vector<std::string> groups;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(r, ec))
        if (e.is_directory() && !yaml_stems(e.path()).empty()) groups.push_back(e.path().filename().string());
      if (!groups.empty()) {
        std::sort(groups.begin(), groups.end());
        return groups;
      }
    }
    return {};
  }

  std::string option_file(const Entry& e) const {
    for (const auto& r : roots_) {
      std::error_code ec;  // an option name the file system refuses (too long, ...) is simply not found
      const fs::path dir = fs::path(r) / e.group;
      if (!fs::is_directory(dir, ec)) continue;
      const fs::path f = dir / (*e.option + ".yaml");
      if (fs::is_regular_file(f, ec)) return display_path(f);
      throw Error(fmt::format("config group '{}' has no option '{}' ({} not found)", e.group, *e.option,
                              display_path(f)),
                  e.where, fmt::format("use one of: {}", fmt::join(yaml_stems(dir), ", ")));
    }
    auto groups = known_groups();
    throw Error(fmt::format("no config group '{}' (searched {})", e.group, fmt::join(roots_, ", ")), e.where,
                groups.empty() ? std::string("put group folders next to the config or list their parent in PRISM_CONFIG_PATH")
                               : fmt::format("use one of the groups: {}", fmt::join(groups, ", ")));
  }

  std::vector<Entry> parse_defaults(const YAML::Node& list, const std::string& file, const std::string& group_of_file) {
    std::vector<Entry> out;
    const std::string where_list = mark_of(file, list) + " key defaults";
    if (!list.IsSequence())
      throw Error("'defaults' must be a list", where_list, "write it as `defaults:` followed by `- group: option` lines");
    bool self_seen = false;
    for (const auto& item : list) {
      Entry e;
      e.where = mark_of(file, item) + " key defaults";
      if (item.IsScalar()) {
        const std::string s = item.Scalar();
        if (s == "_self_") {
          if (self_seen) throw Error("_self_ is listed twice", e.where, "keep one _self_ entry");
          self_seen = true;
          e.kind = Entry::Kind::Self;
        } else {
          e.kind = Entry::Kind::File;
          e.name = s;
        }
      } else if (item.IsMap() && item.size() == 1) {
        std::string key = trim(item.begin()->first.Scalar());
        const YAML::Node value = item.begin()->second;
        if (key.rfind("override ", 0) == 0) {
          e.is_override = true;
          key = trim(key.substr(9));
        }
        if (key.rfind("optional ", 0) == 0)
          throw Error("optional defaults entries are not supported", e.where, "list the group without `optional`");
        const auto at = key.find('@');
        if (at != std::string::npos) {
          std::string pkg = key.substr(at + 1);
          e.package = pkg == "_global_" ? "" : pkg;
          key = key.substr(0, at);
        }
        e.kind = Entry::Kind::Group;
        e.group = key.rfind('/', 0) == 0 ? key.substr(1)
                                         : (group_of_file.empty() ? key : group_of_file + "/" + key);
        if (value.IsNull()) {
          e.option = std::nullopt;
        } else if (value.IsScalar()) {
          e.option = value.Scalar();
        } else {
          throw Error(fmt::format("defaults entry for group '{}' must name one option", key), e.where,
                      fmt::format("write `- {}: <option>`", key));
        }
      } else {
        throw Error(fmt::format("defaults entry {} is not `group: option`, `_self_` or a config name", describe_yaml(item)),
                    e.where, "write entries as `- model: cpu-128`, `- _self_` or `- other-config`");
      }
      out.push_back(e);
    }
    if (!self_seen) {
      Entry self;
      self.kind = Entry::Kind::Self;
      out.push_back(self);  // the file's own keys win over its defaults
    }
    return out;
  }

  // `package`: where the file's own keys merge (nullopt: its header decides, else the root).
  // Returns the package the file's own keys merged at.
  std::string expand(const std::string& path, const std::string& group_of_file, std::optional<std::string> package,
                     bool primary) {
    const std::string file = display_path(path);
    if (++depth_ > 32)
      throw Error("defaults lists nest more than 32 deep", file, "look for a config that includes itself");
    out_.files.push_back(file);
    YAML::Node doc = load_yaml_file(path);
    if (!doc.IsMap())
      throw Error(fmt::format("a config file must be a mapping of key: value, got {}", describe_yaml(doc)), file,
                  "write it as `key: value` lines");
    std::vector<Entry> entries;
    if (doc["defaults"]) {
      entries = parse_defaults(doc["defaults"], file, group_of_file);
      doc.remove("defaults");
    } else {
      entries.push_back(Entry{});  // only _self_
    }
    if (!package) {
      // A group option merges at its group's key unless its header says otherwise;
      // a primary or included file merges at the root.
      const std::string header = package_header(path);
      if (header == "_global_") package = "";
      else if (header == "_group_" || (header.empty() && !group_of_file.empty())) package = group_of_file;
      else package = header;
      std::replace(package->begin(), package->end(), '/', '.');
    }
    for (const auto& e : entries) {
      if (!e.is_override) continue;
      if (!primary)
        throw Error("`override` entries are read only in the primary config's defaults list", e.where,
                    "move the entry to the primary config, or choose the option on the command line");
      if (!e.option) throw Error("`override` entry without an option", e.where, "name the option");
      file_overrides_[e.group] = e.where;
      file_override_option_[e.group] = *e.option;
    }
    for (const auto& e : entries) {
      switch (e.kind) {
        case Entry::Kind::Self:
          items_.push_back({doc, *package, file});
          break;
        case Entry::Kind::Group:
          if (!e.is_override) expand_group(e);
          break;
        case Entry::Kind::File: {
          fs::path p = fs::path(path).parent_path() / e.name;
          if (p.extension() != ".yaml") p += ".yaml";
          std::error_code ec;
          if (!fs::is_regular_file(p, ec))
            throw Error(fmt::format("defaults entry '{}' names no file ({} not found)", e.name, display_path(p)), e.where,
                        "name a config file relative to this one, or write `group: option` for a group");
          expand(p.string(), "", std::nullopt, false);
          break;
        }
      }
    }
    --depth_;
    return *package;
  }

  void expand_group(Entry e) {
    // The same group may merge at two packages (`train@data: x`); once per package.
    const std::string slot = e.package ? e.group + "@" + *e.package : e.group;
    if (chosen_.count(slot))
      throw Error(fmt::format("config group '{}' is chosen twice (first at {})", slot, chosen_[slot]), e.where,
                  fmt::format("keep one entry; to replace another file's choice write `- override {}: <option>` in the "
                              "primary config or {}=<option> on the command line",
                              e.group, e.group));
    chosen_[slot] = e.where;
    auto cli = e.package ? cli_choice_.end() : cli_choice_.find(e.group);
    if (cli != cli_choice_.end()) {
      used_.insert(e.group);
      const Override& o = *cli->second;
      if (o.op == Override::Op::Remove) {
        if (o.value && e.option && *o.value != *e.option)
          throw Error(fmt::format("cannot remove {}={}: the chosen option is {}", e.group, *o.value, *e.option),
                      o.where(), fmt::format("write ~{}", e.group));
        return;
      }
      e.option = *o.value;
      e.where = o.where();
    } else if (!e.package && file_override_option_.count(e.group)) {
      used_.insert(e.group);
      e.option = file_override_option_[e.group];
      e.where = file_overrides_[e.group];
    }
    if (!e.option) return;  // `group: null`: nothing chosen
    const std::string file = option_file(e);
    std::optional<std::string> pkg = e.package;
    if (pkg) std::replace(pkg->begin(), pkg->end(), '/', '.');
    out_.groups.push_back({e.group, *e.option, file, ""});
    const size_t index = out_.groups.size() - 1;
    out_.groups[index].package = expand(file, e.group, pkg, false);
  }

  void place(const MergeItem& item) {
    YAML::Node target = out_.root;
    if (!item.package.empty()) {
      auto parts = split_key(item.package, item.file + " @package");
      target.reset(ensure_map_path(out_.root, parts, parts.size(), [&](const std::string& why) {
        return Error(fmt::format("cannot merge {} at package {}: {}", item.file, item.package, why), item.file,
                     "check the file's # @package line and the keys set before it");
      }));
    }
    merge_into(target, item.node, item.package, out_.origins.get(), item.file);
  }

  std::vector<std::string> roots_;
  std::vector<Override> group_overrides_, key_overrides_;
  std::map<std::string, const Override*> cli_choice_;
  std::map<std::string, std::string> file_overrides_, file_override_option_;
  std::map<std::string, std::string> chosen_;  // group -> where chosen
  std::set<std::string> used_;
  std::vector<MergeItem> items_;
  ComposedConfig out_;
  int depth_ = 0;
};

}  // namespace

std::vector<std::string> config_search_path(const std::string& path, const ComposeOptions& options) {
  std::vector<std::string> roots;
  auto add = [&](const fs::path& p) {
    const std::string s = display_path(p);
    if (std::find(roots.begin(), roots.end(), s) == roots.end()) roots.push_back(s);
  };
  if (const char* env = std::getenv("PRISM_CONFIG_PATH")) {
    std::stringstream ss(env);
    for (std::string p; std::getline(ss, p, ':');)
      if (!p.empty()) add(p);
  }
  for (const auto& p : options.search_path) add(p);
  std::error_code ec;
  if (path.empty()) {
    // No primary file: the repository's config groups, from the working directory.
    if (fs::is_directory("experiments", ec)) add("experiments");
    return roots;
  }
  fs::path dir = fs::absolute(path, ec).lexically_normal().parent_path();
  while (true) {
    add(dir);
    if (dir == dir.root_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return roots;
}

ComposedConfig compose(const std::string& path, const std::vector<Override>& overrides,
                       const ComposeOptions& options) {
  Composer c(config_search_path(path, options), overrides);
  return c.run(path, options.resolve);
}

ComposedConfig compose_config(const std::string& path, const std::vector<std::string>& overrides,
                              const ComposeOptions& options) {
  return compose(path, parse_overrides(overrides), options);
}

}  // namespace prism
