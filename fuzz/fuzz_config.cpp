// Config composition with overrides and interpolation, then the typed config:
// what `prism train CONFIG key=value ...` does with its arguments.
//
// Input: the primary YAML file, optionally followed by more files and the
// command-line overrides, each section starting with a marker line:
//   <main.yaml text>
//   #%file model/wide.yaml      another file (a group option, or a file the
//   <its text>                  defaults list names), relative to main.yaml
//   #%overrides
//   train.lr=3e-4               one override per line
// Groups not given in the input come from experiments/ (model/, train/, ...).
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "prism/config/compose.h"
#include "prism/config/config.h"

namespace {

struct Input {
  std::vector<std::pair<std::string, std::string>> files;  // name -> text, main.yaml first
  std::vector<std::string> overrides;
};

// A file name the input may use: a relative path of [a-z0-9_-] parts ending in .yaml.
bool safe_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.front() == '/' || name.find("..") != std::string::npos) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '/' || c == '.')) return false;
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0;
}

Input split(std::string_view data) {
  Input in;
  in.files.push_back({"main.yaml", ""});
  std::string* text = &in.files.back().second;
  bool overrides = false;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    const std::string line(data.substr(pos, end - pos));
    pos = end + 1;
    if (line.rfind("#%file ", 0) == 0 && safe_name(line.substr(7)) && in.files.size() < 16) {
      in.files.push_back({line.substr(7), ""});
      text = &in.files.back().second;
      overrides = false;
    } else if (line == "#%overrides") {
      overrides = true;
    } else if (overrides) {
      if (!line.empty() && in.overrides.size() < 32) in.overrides.push_back(line);
    } else {
      *text += line + "\n";
    }
  }
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  if (size > 64 * 1024) return -1;  // configs are small; larger inputs only slow the search
  const Input in = split(std::string_view(reinterpret_cast<const char*>(data), size));
  scratch.clear();
  std::string main;
  for (const auto& [name, text] : in.files) {
    const std::string path = scratch.write(name, text);
    if (main.empty()) main = path;
  }
  prism::fuzz::expect_clean([&] {
    prism::ComposeOptions options;
    options.search_path = {prism::fuzz::source_path("experiments")};
    auto composed = prism::compose(main, prism::parse_overrides(in.overrides), options);
    auto config = prism::parse_config(composed.root, composed.source, composed.origins);
    // The resolved config is what a run saves as config.yaml and --resume loads: it
    // must load again (an error here is a finding, not bad input) to the same text.
    const std::string saved = prism::to_yaml(config);
    std::string again;
    try {
      again = prism::to_yaml(prism::load_config(scratch.write("run/config.yaml", saved)));
    } catch (const prism::Error& e) {
      prism::fuzz::finding(std::string("the saved config does not load again: ") + e.what() + "\n" + saved);
    }
    if (again != saved) prism::fuzz::finding("the saved config loads to another config:\n" + saved + "\n---\n" + again);
  });
  return 0;
}
