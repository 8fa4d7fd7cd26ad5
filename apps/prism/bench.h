#pragma once
// `prism bench <name>`: each benchmark file registers itself here. A benchmark
// prints what it measured, on what machine, and as ratios against a named
// baseline run in the same process.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prism/train/step_probe.h"

namespace prism::cli {

struct Benchmark {
  std::string name;     // prism bench <name>
  std::string summary;  // one line for `prism bench --help`
  std::function<int(const std::vector<std::string>& args)> run;
};

struct BenchRegistration {
  explicit BenchRegistration(Benchmark b);
};

std::vector<Benchmark> benchmarks();

// "AMD EPYC ..., 2 threads, LibTorch 2.13.0 (CPU)" -- printed by every benchmark.
std::string machine_description();

// Runs a shell command (a reference implementation in Python) and returns what it
// printed, stdout and stderr together, with its exit status in `status`. Throws
// prism::Error when the command cannot be started.
std::string capture(const std::string& cmd, int& status);

// Training batches of random tokens: prism::random_token_batches (train/step_probe.h).
using prism::random_token_batches;

}  // namespace prism::cli
