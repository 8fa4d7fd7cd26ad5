// prism schedule check | enumerate | inspect
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <sstream>

#include "cli.h"
#include "prism/config/cost.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/model/gpt.h"
#include "prism/schedule/enumerate.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "check|enumerate|inspect [options] [key=value ...]\n\n"
    "  check      validate a schedule against the paper's rules 1-6 (exit 1 if invalid)\n"
    "  enumerate  list every schedule of a model shape under the rules, with a count\n"
    "  inspect    per layer heads, head width, tensor-core alignment; parameters and\n"
    "             FLOPs per token of the whole model next to its uniform baseline\n\n"
    "examples:\n"
    "  prism schedule inspect --model gpt2-124m --heads 3x3,6x3,12x6\n"
    "  prism schedule check --model gpt2-354m --staircase 256:4,128:4,64:16\n"
    "  prism schedule enumerate --model gpt2-124m --head-dims 256,128";

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

std::string describe_shape(const ModelConfig& m) {
  return fmt::format("{}{} layers x {}, baseline {} heads (d_h {}), context {}, vocab {}",
                     m.preset.empty() ? "" : m.preset + ": ", m.n_layer, m.d_model, m.n_head, m.head_dim_base(),
                     m.block_size, m.vocab_size);
}

// The shape, and where its vocabulary came from (parameters and FLOPs depend on it).
std::string describe_shape(const Config& c) {
  return describe_shape(c.model) + (c.model.vocab_from_data ? fmt::format(" ({})", c.vocab_source) : std::string());
}

int check(const Config& c) {
  std::cout << fmt::format("schedule {} on {}\n", c.schedule.compact(), describe_shape(c));
  // parse_config already threw for errors; what is left are guideline warnings.
  if (c.schedule_warnings.empty()) {
    std::cout << "valid: satisfies all six rules\n";
  } else {
    std::cout << fmt::format("valid (hard rules 1-3 hold), {} guideline warning{}:\n", c.schedule_warnings.size(),
                             c.schedule_warnings.size() == 1 ? "" : "s");
    for (const auto& f : c.schedule_warnings) std::cout << "  warning: " << f.describe() << "\n";
  }
  return 0;
}

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> v;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      v.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::logic_error&) {
      throw Error(fmt::format("cannot read '{}' in {} {}", item, flag, text), "command line",
                  fmt::format("give integers separated by commas, e.g. {} 256,128", flag));
    }
  }
  return v;
}

int enumerate(const Config& c, const po::variables_map& vm) {
  EnumerationSpace sp;
  sp.n_layer = c.model.n_layer;
  sp.d_model = c.model.d_model;
  sp.h_base = c.model.n_head;
  sp.rules = c.rules;
  if (vm.count("head-dims")) sp.head_dims = parse_int_list(vm["head-dims"].as<std::string>(), "--head-dims");
  if (vm.count("block")) {
    auto b = vm["block"].as<std::string>();
    auto dash = b.find('-');
    auto v = parse_int_list(dash == std::string::npos ? b : b.substr(0, dash) + "," + b.substr(dash + 1), "--block");
    sp.rules.block_min = v.front();
    sp.rules.block_max = v.back();
  }
  if (vm.count("baseline-share")) sp.rules.baseline_share = vm["baseline-share"].as<double>();
  sp.include_uniform = !vm["no-uniform"].as<bool>();
  auto dims = sp.head_dims.empty() ? default_wide_head_dims(sp.d_model, sp.h_base) : sp.head_dims;
  auto all = enumerate_schedules(sp);
  const std::string format = vm["format"].as<std::string>();
  if (format == "json") {
    nlohmann::json j;
    j["model"] = describe_shape(c);
    j["head_dims"] = dims;
    j["count"] = all.size();
    for (const auto& s : all) j["schedules"].push_back(s.heads());
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (format == "list") {
    for (const auto& s : all) std::cout << s.compact() << "\n";
    return 0;
  }
  std::cout << fmt::format("{}\nwide head widths {}, stages of {}-{} layers, baseline share >= {:g}{}\n",
                           describe_shape(c), fmt::join(dims, ","), sp.rules.block_min, sp.rules.block_max,
                           sp.rules.baseline_share, sp.rules.strict ? ", guidelines strict" : "");
  std::cout << fmt::format("{} schedule{}:\n", all.size(), all.size() == 1 ? "" : "s");
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<int> widths;
    for (auto [h, n] : all[i].runs()) widths.push_back(c.model.d_model / h);
    std::cout << fmt::format("  {:>4}  {:<28} d_h {}{}\n", i + 1, all[i].compact(), fmt::join(widths, ">"),
                             all[i].is_uniform() ? "  (uniform baseline)" : "");
  }
  return 0;
}

int inspect(const Config& c, const po::variables_map& vm) {
  const int T = vm.count("context") ? vm["context"].as<int>() : c.model.block_size;
  auto cost = model_cost(c.model, c.schedule, T);
  auto base = model_cost(c.model, HeadSchedule::uniform(c.model.n_layer, c.model.n_head), T);
  double scores = 0, base_scores = 0;
  for (const auto& l : cost.layers) scores += l.score_elements;
  for (const auto& l : base.layers) base_scores += l.score_elements;
  if (vm["format"].as<std::string>() == "json") {
    nlohmann::json j;
    j["model"] = describe_shape(c);
    j["schedule"] = c.schedule.heads();
    j["context"] = T;
    for (size_t l = 0; l < cost.layers.size(); ++l) {
      const auto& lc = cost.layers[l];
      j["layers"].push_back({{"layer", l}, {"heads", lc.heads}, {"head_dim", lc.head_dim},
                             {"tensor_core_aligned", lc.tensor_core_aligned}, {"params", lc.params},
                             {"matmul_flops_per_token", lc.matmul_flops},
                             {"attention_flops_per_token", lc.attention_flops},
                             {"score_elements_per_token", lc.score_elements}});
    }
    j["params"] = cost.params;
    j["params_without_positions"] = cost.params_without_positions;
    j["forward_flops_per_token"] = cost.forward_flops_per_token;
    j["train_flops_per_token"] = cost.train_flops_per_token;
    j["uniform"] = {{"params", base.params}, {"forward_flops_per_token", base.forward_flops_per_token},
                    {"score_elements_per_token", base_scores}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("schedule {} on {}\n\n", c.schedule.compact(), describe_shape(c));
  std::cout << fmt::format("{:>5} {:>5} {:>5} {:>11} {:>12} {:>13} {:>13} {:>10}\n", "layer", "heads", "d_h",
                           "tensor-core", "params", "matmul MF/tok", "attn MF/tok", "scores/tok");
  for (size_t l = 0; l < cost.layers.size(); ++l) {
    const auto& lc = cost.layers[l];
    std::cout << fmt::format("{:>5} {:>5} {:>5} {:>11} {:>12} {:>13.2f} {:>13.2f} {:>10}\n", l, lc.heads, lc.head_dim,
                             lc.tensor_core_aligned ? "yes" : "no", with_commas(lc.params), lc.matmul_flops / 1e6,
                             lc.attention_flops / 1e6, with_commas(static_cast<int64_t>(lc.score_elements)));
  }
  auto verdict = [](double a, double b) { return a == b ? std::string("equal") : fmt::format("{:+.4f}%", 100.0 * (a - b) / b); };
  std::cout << fmt::format("\n{:<34} {:>16} {:>16}  {}\n", "whole model", "this schedule", "uniform", "");
  std::cout << fmt::format("{:<34} {:>16} {:>16}  {}\n", "parameters", with_commas(cost.params),
                           with_commas(base.params), verdict(cost.params, base.params));
  std::cout << fmt::format("{:<34} {:>16} {:>16}  {}\n", "parameters without position table",
                           with_commas(cost.params_without_positions), with_commas(base.params_without_positions),
                           verdict(cost.params_without_positions, base.params_without_positions));
  std::cout << fmt::format("{:<34} {:>16.4f} {:>16.4f}  {}\n", "forward GFLOPs per token", cost.forward_flops_per_token / 1e9,
                           base.forward_flops_per_token / 1e9,
                           verdict(cost.forward_flops_per_token, base.forward_flops_per_token));
  std::cout << fmt::format("{:<34} {:>16.4f} {:>16.4f}  {}\n", "training GFLOPs per token (3x fwd)",
                           cost.train_flops_per_token / 1e9, base.train_flops_per_token / 1e9,
                           verdict(cost.train_flops_per_token, base.train_flops_per_token));
  std::cout << fmt::format("{:<34} {:>16} {:>16}  {:.2f}x\n", "attention scores per token", with_commas(static_cast<int64_t>(scores)),
                           with_commas(static_cast<int64_t>(base_scores)), scores / base_scores);
  std::cout << "(scores per token = sum of h_l * T: softmax work and the size of explicit attention\n"
               " matrices, the one cost that depends on the head count; fused kernels never store them)\n";
  if (vm["verify"].as<bool>()) {
    torch::NoGradGuard ng;
    GPT model(c.model, c.schedule);
    int64_t n = model->num_params(true);
    std::cout << fmt::format("built the model: {} parameters ({})\n", with_commas(n),
                             n == cost.params ? "matches" : "MISMATCH with the analytic count");
    if (n != cost.params) return 1;
  }
  std::cout << "\n";
  return check(c);
}

int run(const std::vector<std::string>& args) {
  return guarded("schedule", [&]() -> int {
    po::options_description opts = model_options();
    po::options_description more("Subcommand options");
    more.add_options()
        ("action", po::value<std::string>(), "check | enumerate | inspect")
        ("head-dims", po::value<std::string>(), "enumerate: wide head widths to use (default: powers of two above the baseline width, up to 256)")
        ("block", po::value<std::string>(), "enumerate: layers per wide stage, MIN-MAX (default 2-4)")
        ("baseline-share", po::value<double>(), "enumerate: least share of layers at the baseline count (default 0.5)")
        ("no-uniform", po::bool_switch(), "enumerate: leave the uniform baseline out")
        ("context", po::value<int>(), "inspect: context length for attention FLOPs (default: block_size)")
        ("verify", po::bool_switch(), "inspect: also build the model and count its parameters")
        ("format", po::value<std::string>()->default_value("text"), "text | json (enumerate also: list)");
    opts.add(more);
    po::positional_options_description pos;
    pos.add("action", 1).add("set", -1);
    po::variables_map vm;
    if (!parse("schedule", kUsage, opts, pos, args, vm)) return 0;
    if (!vm.count("action"))
      throw Error("no action given", "prism schedule", "use `prism schedule check|enumerate|inspect --model PRESET`");
    std::string action = vm["action"].as<std::string>();
    std::string format = vm["format"].as<std::string>();
    if (format != "text" && format != "json" && format != "list")
      throw Error(fmt::format("unknown --format '{}'", format), "prism schedule", "use text or json");
    if (action != "check" && action != "enumerate" && action != "inspect")
      throw Error(fmt::format("unknown action '{}'", action), "prism schedule", "use check, enumerate or inspect");
    Config c;
    try {
      c = config_from_options(vm);
    } catch (const Error& e) {
      if (action != "check") throw;
      std::cerr << fmt::format("prism schedule: invalid: {}\n", e.what());
      return 1;
    }
    if (vm["print-config"].as<bool>()) {
      std::cout << print_config(c);
      return 0;
    }
    if (action == "check") return check(c);
    if (action == "enumerate") return enumerate(c, vm);
    return inspect(c, vm);
  });
}

const Registration reg{{30, "schedule", "check, enumerate and inspect head schedules", run}};

}  // namespace
}  // namespace prism::cli
