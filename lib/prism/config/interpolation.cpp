#include "prism/config/interpolation.h"

#include <fmt/format.h>

#include <set>
#include <string>

#include "prism/config/key_path.h"
#include "prism/error.h"

namespace prism {

namespace {

class Resolver {
 public:
  Resolver(YAML::Node root, const KeyOrigins* origins) : root_(root), origins_(origins) {}

  void run() { walk(root_, ""); }

 private:
  static bool has_ref(const YAML::Node& n) {
    return n.IsScalar() && n.Scalar().find("${") != std::string::npos;
  }

  std::string where(const std::string& path) const {
    if (origins_) {
      auto it = origins_->find(path);
      if (it != origins_->end()) return it->second + " key " + path;
    }
    return "key " + path;
  }

  void walk(YAML::Node node, const std::string& path) {
    if (node.IsMap()) {
      // Values are replaced through their own handles, never through node[key]: a key that is not a
      // string (null, a number spelled differently, a sequence) would not be found by its text, and
      // the insertion would reallocate the map under this loop's iterator.
      for (auto kv : node) {
        const std::string kp = join_key(path, kv.first.Scalar());
        YAML::Node value = kv.second;
        if (has_ref(value) && !done_.count(kp)) value = resolve_scalar(value, kp);
        else walk(value, kp);
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        const std::string kp = join_key(path, std::to_string(i));
        YAML::Node value = node[i];
        if (has_ref(value) && !done_.count(kp)) value = resolve_scalar(value, kp);
        else walk(value, kp);
      }
    }
  }

  // The value of a referenced key, itself resolved first.
  YAML::Node value_of(const std::string& ref, const std::string& from) {
    YAML::Node target = lookup_key(root_, ref);
    if (!target.IsDefined())
      throw Error(fmt::format("interpolation ${{{}}} names a key that is not set", ref), where(from),
                  fmt::format("set {} or correct the reference", ref));
    if (active_.count(ref))
      throw Error(fmt::format("interpolation ${{{}}} refers back to itself", ref), where(from),
                  "break the cycle of references");
    if (has_ref(target) && !done_.count(ref)) {
      YAML::Node resolved = resolve_scalar(target, ref);
      target = resolved;  // write back through the handle: resolved once
      return resolved;
    }
    if (target.IsMap() || target.IsSequence()) {
      active_.insert(ref);
      walk(target, ref);
      active_.erase(ref);
    }
    return target;
  }

  YAML::Node resolve_scalar(const YAML::Node& n, const std::string& path) {
    if (active_.count(path))
      throw Error(fmt::format("interpolation cycle through {}", path), where(path), "break the cycle of references");
    active_.insert(path);
    const std::string text = n.Scalar();
    std::string out;
    YAML::Node whole;
    size_t refs = 0;
    bool literal_text = false;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\\${") == 0) {
        out += "${";
        i += 3;
        literal_text = true;
        continue;
      }
      if (text.compare(i, 2, "${") == 0) {
        const auto close = text.find('}', i + 2);
        if (close == std::string::npos)
          throw Error(fmt::format("unclosed interpolation in '{}'", text), where(path), "close it with '}'");
        const std::string ref = trim(text.substr(i + 2, close - i - 2));
        if (ref.empty() || ref[0] == '.' || ref.find(':') != std::string::npos)
          throw Error(fmt::format("interpolation ${{{}}} is not an absolute key path", ref), where(path),
                      "write ${section.key}, e.g. ${train.seq_len}");
        YAML::Node v = value_of(ref, path);
        ++refs;
        if (i == 0 && close + 1 == text.size()) {
          whole = YAML::Clone(v);
        } else {
          if (!v.IsScalar())
            throw Error(fmt::format("interpolation ${{{}}} inside text must name a single value, got {}", ref,
                                    describe_yaml(v)),
                        where(path), fmt::format("use ${{{}}} as the whole value, or refer to one value", ref));
          out += v.Scalar();
        }
        i = close + 1;
        continue;
      }
      out += text[i++];
    }
    active_.erase(path);
    done_.insert(path);
    if (refs == 1 && whole.IsDefined() && !literal_text && out.empty()) return whole;
    return YAML::Node(out);
  }

  YAML::Node root_;
  const KeyOrigins* origins_;
  std::set<std::string> active_, done_;
};

}  // namespace

void resolve_interpolations(YAML::Node& root, const KeyOrigins* origins) { Resolver(root, origins).run(); }

}  // namespace prism
