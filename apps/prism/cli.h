#pragma once
// Shared plumbing of the subcommands: option parsing, error reporting, the
// model/schedule selection every command that builds a model accepts.
#include <boost/program_options.hpp>

#include <functional>
#include <string>
#include <vector>

#include "prism/config/config.h"

namespace prism::cli {

namespace po = boost::program_options;

struct Command {
  int order;  // position in `prism --help`
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

// Every registered subcommand, sorted by order.
std::vector<Command> commands();

// Each cmd_*.cpp registers itself: `static const Registration reg{{10, "train", "...", run}};`
struct Registration {
  explicit Registration(Command c);
};

// Runs `body`, turning prism::Error and LibTorch errors into one line on stderr.
// Exit codes: what body returns; 2 for a usage or input error; 3 for an internal error.
int guarded(const std::string& command, const std::function<int()>& body);

// Parses args into vm; prints help and returns false if --help was given.
bool parse(const std::string& command, const std::string& usage, const po::options_description& opts,
           const po::positional_options_description& pos, const std::vector<std::string>& args, po::variables_map& vm);

// The model + schedule a command works on: --config FILE [key=value ...] or
// --model PRESET with --heads / --staircase, composed as `prism train` composes
// (compose_run_config: defaults lists, group=option and key=value overrides, the
// data's vocabulary); a sweep or study file gives its base config.
po::options_description model_options();
Config config_from_options(const po::variables_map& vm);

}  // namespace prism::cli
