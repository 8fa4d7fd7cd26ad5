#include "cli.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>

#include "prism/data/dataset.h"
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
      ("config,c", po::value<std::string>(), "YAML config, composed as prism train composes it (a sweep or study file: its base config)")
      ("model,m", po::value<std::string>(), "model preset: gpt2-124m, gpt2-354m, prism-757m, cpu-128, cpu-192, cpu-256, test-tiny, study-tiny")
      ("heads", po::value<std::string>(), "head count per layer: 3,3,3,6,6,6,12x6 (NxK repeats N K times)")
      ("staircase", po::value<std::string>(), "head widths and their layers: 256:3,128:3,64:6")
      ("strict", po::bool_switch(), "treat the design guidelines (rules 4-6) as errors")
      ("set", po::value<std::vector<std::string>>()->composing(), "key=value or group=option override (also accepted positionally)")
      ("print-config", po::bool_switch(), "print the resolved config and exit");
  return o;
}

Config config_from_options(const po::variables_map& vm) {
  std::vector<std::string> overrides;
  if (vm.count("model")) overrides.push_back("model.preset=" + vm["model"].as<std::string>());
  if (vm.count("heads") && vm.count("staircase"))
    throw Error("both --heads and --staircase given", "command line", "give one of them");
  if (vm.count("heads")) overrides.push_back("schedule.heads=\"" + vm["heads"].as<std::string>() + "\"");
  if (vm.count("staircase")) overrides.push_back("schedule.staircase=\"" + vm["staircase"].as<std::string>() + "\"");
  if (vm.count("strict") && vm["strict"].as<bool>()) overrides.push_back("schedule.strict=true");
  if (vm.count("set"))
    for (const auto& s : vm["set"].as<std::vector<std::string>>()) overrides.push_back(s);
  const std::string path = vm.count("config") ? vm["config"].as<std::string>() : std::string();
  const bool names_model = std::any_of(overrides.begin(), overrides.end(), [](const std::string& o) {
    const std::string key = o.substr(o.find_first_not_of("+~"));
    return key.rfind("model", 0) == 0;
  });
  if (path.empty() && !names_model)
    throw Error("no model given", "command line", "pass --model PRESET (e.g. gpt2-124m) or --config FILE");
  // The one composition path (data/dataset.h): a study or sweep file gives its base config.
  return compose_run_config(path, overrides, SweepSection::Drop);
}

}  // namespace prism::cli
