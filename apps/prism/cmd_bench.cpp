// prism bench <name> [options]: dispatches to the registered benchmarks.
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench.h"
#include "cli.h"
#include "prism/error.h"
#include "prism/train/step_probe.h"

namespace prism::cli {

namespace {
std::vector<Benchmark>& registry() {
  static std::vector<Benchmark> r;
  return r;
}

void usage() {
  std::cout << "usage: prism bench <name> [options]\n\nbenchmarks:\n";
  for (const auto& b : benchmarks()) std::cout << fmt::format("  {:<12} {}\n", b.name, b.summary);
  std::cout << "\n`prism bench <name> --help` lists each benchmark's options.\n";
}

int run(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    usage();
    return args.empty() ? 2 : 0;
  }
  for (const auto& b : benchmarks())
    if (b.name == args[0]) return b.run(std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << fmt::format("prism bench: error: unknown benchmark '{}'. Fix: run `prism bench --help` for the list\n",
                           args[0]);
  return 2;
}

const Registration reg{{90, "bench", "benchmarks, printed as ratios against a baseline run alongside", run}};
}  // namespace

BenchRegistration::BenchRegistration(Benchmark b) { registry().push_back(std::move(b)); }

std::vector<Benchmark> benchmarks() {
  auto b = registry();
  std::sort(b.begin(), b.end(), [](const Benchmark& x, const Benchmark& y) { return x.name < y.name; });
  return b;
}

std::string capture(const std::string& cmd, int& status) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw Error("cannot start the reference", cmd, "check --python");
  std::string out;
  char buf[4096];
  for (size_t k; (k = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
  status = pclose(p);
  return out;
}

std::string machine_description() { return bench_machine(); }

}  // namespace prism::cli
