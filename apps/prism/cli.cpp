#include "cli.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>

#include "prism/error.h"

namespace prism::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace

Registration::Registration(Command c) { registry().push_back(std::move(c)); }

std::vector<Command> commands() {
  auto c = registry();
  std::sort(c.begin(), c.end(), [](const Command& a, const Command& b) { return a.order < b.order; });
  return c;
}

int guarded(const std::string& command, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::cerr << fmt::format("prism {}: error: {}\n", command, e.what());
    return 2;
  } catch (const po::error& e) {
    std::cerr << fmt::format("prism {}: error: {}. Fix: see `prism {} --help`\n", command, e.what(), command);
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << fmt::format("prism {}: error from LibTorch: {}\n", command, e.what_without_backtrace());
    return 3;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("prism {}: internal error: {}\n", command, e.what());
    return 3;
  }
}

bool parse(const std::string& command, const std::string& usage, const po::options_description& opts,
           const po::positional_options_description& pos, const std::vector<std::string>& args,
           po::variables_map& vm) {
  po::options_description all(opts);
  all.add_options()("help,h", "show this help");
  po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: prism " << command << " " << usage << "\n\n" << all << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

po::options_description model_options() {
  po::options_description o("Model and schedule");
  o.add_options()
      ("config,c", po::value<std::string>(), "YAML config file (model:, schedule:, ... sections)")
      ("model,m", po::value<std::string>(), "model preset: gpt2-124m, gpt2-354m, prism-757m, cpu-128, cpu-192, cpu-256, test-tiny, study-tiny")
      ("heads", po::value<std::string>(), "head count per layer: 3,3,3,6,6,6,12x6 (NxK repeats N K times)")
      ("staircase", po::value<std::string>(), "head widths and their layers: 256:3,128:3,64:6")
      ("strict", po::bool_switch(), "treat the design guidelines (rules 4-6) as errors")
      ("set", po::value<std::vector<std::string>>()->composing(), "key=value override (also accepted positionally)");
  return o;
}

Config config_from_options(const po::variables_map& vm) {
  YAML::Node root(YAML::NodeType::Map);
  std::string source = "command line";
  if (vm.count("config")) {
    source = vm["config"].as<std::string>();
    root = load_yaml_file(source);
  }
  std::vector<std::string> overrides;
  if (vm.count("model")) overrides.push_back("model.preset=" + vm["model"].as<std::string>());
  if (vm.count("heads") && vm.count("staircase"))
    throw Error("both --heads and --staircase given", "command line", "give one of them");
  if (vm.count("heads")) overrides.push_back("schedule.heads=\"" + vm["heads"].as<std::string>() + "\"");
  if (vm.count("staircase")) overrides.push_back("schedule.staircase=\"" + vm["staircase"].as<std::string>() + "\"");
  if (vm.count("strict") && vm["strict"].as<bool>()) overrides.push_back("schedule.strict=true");
  if (vm.count("set"))
    for (const auto& s : vm["set"].as<std::vector<std::string>>()) overrides.push_back(s);
  for (const auto& o : overrides) apply_override(root, o);
  if (!vm.count("config") && !vm.count("model") && !root["model"])
    throw Error("no model given", "command line", "pass --model PRESET (e.g. gpt2-124m) or --config FILE");
  return parse_config(root, overrides.empty() ? source : source + " (with overrides)");
}

}  // namespace prism::cli
