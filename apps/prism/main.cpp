// prism: one binary, one subcommand per file (cmd_*.cpp), each a thin layer
// that parses flags and calls lib/prism.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "prism/train/host_memory.h"

namespace {
void usage() {
  std::cout << "prism " PRISM_VERSION " -- progressive head schedules for GPT-style Transformers\n\n"
               "usage: prism <command> [options] [key=value ...]\n\ncommands:\n";
  for (const auto& c : prism::cli::commands()) std::cout << fmt::format("  {:<10} {}\n", c.name, c.summary);
  std::cout << "\n`prism <command> --help` explains each command.\n";
}
}  // namespace

int main(int argc, char** argv) {
  prism::keep_freed_host_memory();  // before LibTorch allocates: each step reuses the last one's memory
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  if (name == "--version") {
    std::cout << "prism " PRISM_VERSION "\n";
    return 0;
  }
  for (const auto& c : prism::cli::commands()) {
    if (c.name == name) return c.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::cerr << fmt::format("prism: error: unknown command '{}'. Fix: run `prism --help` for the list\n", name);
  return 2;
}
