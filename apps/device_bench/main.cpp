// prism-device-bench: the GPU measurements of the device check, in a binary that
// needs LibTorch alone (no YAML/HDF5/Boost), so it builds on a bare GPU machine.
//   prism-device-bench attention|train|all [--json FILE] [--quick] [--backend NAME]
//                      [--steps N] [--batch B]
#include <fmt/format.h>
#include <torch/torch.h>

#include <iostream>
#include <string>
#include <vector>

#include "benches.h"

namespace {

const char* kUsage =
    "usage: prism-device-bench attention|train|all [options]\n"
    "  attention   Prism's CUDA kernel vs SDPA flash: d_h 64/128/256, T 1024/4096, bf16, fwd and fwd+bwd\n"
    "  train       gpt2-124m training steps, Prism 3x3,6x3,12x6 vs uniform 12x12 heads, bf16 autocast\n"
    "options:\n"
    "  --json FILE     append one JSON object per measurement to FILE\n"
    "  --quick         fewer tokens and runs (a smoke test, not a measurement)\n"
    "  --backend NAME  attention back end for train (default auto)\n"
    "  --steps N       timed training steps (default 10)\n"
    "  --batch B       training micro-batch (default 16)\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace prism::device_bench;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string what = args[0];
  BenchOptions opt;
  std::string json;
  for (size_t i = 1; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " needs a value");
      return args[++i];
    };
    try {
      if (args[i] == "--json") json = value();
      else if (args[i] == "--quick") opt.quick = true;
      else if (args[i] == "--backend") opt.backend = value();
      else if (args[i] == "--steps") opt.steps = std::stoi(value());
      else if (args[i] == "--batch") opt.batch = std::stoi(value());
      else throw std::invalid_argument("unknown option " + args[i]);
    } catch (const std::exception& e) {
      std::cerr << "prism-device-bench: error: " << e.what() << ". Fix: see --help\n";
      return 2;
    }
  }
  if (what != "attention" && what != "train" && what != "all") {
    std::cerr << "prism-device-bench: error: unknown benchmark '" << what << "'. Fix: attention, train or all\n";
    return 2;
  }
  if (!torch::cuda::is_available()) {
    std::cerr << "prism-device-bench: error: no CUDA device visible to LibTorch. Fix: run on a GPU machine\n";
    return 3;
  }
  std::cout << fmt::format("prism-device-bench: LibTorch {}, {} CUDA device(s)\n", TORCH_VERSION,
                           torch::cuda::device_count());
  const Report report(json);
  int rc = 0;
  try {
    if (what == "attention" || what == "all") rc |= run_attention_bench(opt, report);
    if (what == "train" || what == "all") rc |= run_train_bench(opt, report);
  } catch (const std::exception& e) {
    std::cerr << "prism-device-bench: error: " << e.what() << "\n";
    return 1;
  }
  return rc;
}
