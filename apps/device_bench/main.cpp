// prism-device-bench: the GPU measurements of the device check (scripts/device-check.sh),
// in a binary that needs LibTorch alone (no YAML/HDF5/Boost), so it builds on a bare
// GPU machine from the minimal set too.
//   prism-device-bench smoke|check|attention|loss|train|all [options]
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "benches.h"

namespace {

const char* kUsage =
    "usage: prism-device-bench smoke|check|attention|loss|train|all [options]\n"
    "  smoke       one small attention case against float64 (--small: the smallest, for compute-sanitizer)\n"
    "  check       the CUDA kernel against float64 at every head dim, T up to 4096: out, dq, dk, dv, distance\n"
    "  attention   Prism's CUDA kernel vs SDPA flash: d_h 64/128/256, T 1024/4096, bf16; fwd, bwd, fwd+bwd;\n"
    "              distance on and off\n"
    "  loss        the LM-head loss paths (plain vs chunked) at the 124M shape, bf16 autocast\n"
    "  train       gpt2-124m training steps, Prism 3x3,6x3,12x6 vs uniform 12x12 heads, with MFU and peak memory\n"
    "options:\n"
    "  --json FILE          append one JSON object per measurement to FILE\n"
    "  --quick              fewer tokens and runs (a smoke test, not a measurement)\n"
    "  --small              smoke: the smallest case\n"
    "  --repeat N           attention, loss: time everything N times (default 1)\n"
    "  --backend NAME       attention back end for train (default auto)\n"
    "  --steps N            timed training steps (default 10)\n"
    "  --batches B,...      training micro-batches (default 16)\n"
    "  --schedules S,...    uniform and/or prism (default uniform,prism)\n"
    "  --dtype bf16|fp32    training precision (default bf16: autocast, fp32 master weights)\n"
    "  --tf32 on,off        fp32 training: TF32 matmuls on and/or off (default on)\n"
    "exit status: 0 when every case ran and met its bar; 1 otherwise; 2 bad usage; 3 no CUDA device\n";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  if (out.empty()) throw std::invalid_argument("an empty list");
  return out;
}

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
  try {
    for (size_t i = 1; i < args.size(); ++i) {
      auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " needs a value");
        return args[++i];
      };
      if (args[i] == "--json") json = value();
      else if (args[i] == "--quick") opt.quick = true;
      else if (args[i] == "--small") opt.small = true;
      else if (args[i] == "--repeat") opt.repeat = std::max(1, std::stoi(value()));
      else if (args[i] == "--backend") opt.backend = value();
      else if (args[i] == "--steps") opt.steps = std::max(1, std::stoi(value()));
      else if (args[i] == "--batches") {
        opt.batches.clear();
        for (const auto& b : split(value())) opt.batches.push_back(std::stoi(b));
      } else if (args[i] == "--schedules") {
        opt.schedules = split(value());
        for (const auto& s : opt.schedules)
          if (s != "uniform" && s != "prism") throw std::invalid_argument("unknown schedule " + s + " (uniform, prism)");
      } else if (args[i] == "--dtype") {
        opt.dtype = value();
        if (opt.dtype != "bf16" && opt.dtype != "fp32") throw std::invalid_argument("--dtype is bf16 or fp32");
      } else if (args[i] == "--tf32") {
        opt.tf32 = split(value());
        for (const auto& t : opt.tf32)
          if (t != "on" && t != "off") throw std::invalid_argument("--tf32 takes on and/or off");
      } else {
        throw std::invalid_argument("unknown option " + args[i]);
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "prism-device-bench: error: " << e.what() << ". Fix: see --help\n";
    return 2;
  }
  const std::vector<std::string> known = {"smoke", "check", "attention", "loss", "train", "all"};
  if (std::find(known.begin(), known.end(), what) == known.end()) {
    std::cerr << "prism-device-bench: error: unknown benchmark '" << what
              << "'. Fix: smoke, check, attention, loss, train or all\n";
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
    if (what == "smoke") rc |= run_smoke(opt, report);
    if (what == "check" || what == "all") rc |= run_check(opt, report);
    if (what == "attention" || what == "all") rc |= run_attention_bench(opt, report);
    if (what == "loss" || what == "all") rc |= run_loss_bench(opt, report);
    if (what == "train" || what == "all") rc |= run_train_bench(opt, report);
  } catch (const std::exception& e) {
    std::cerr << "prism-device-bench: error: " << e.what() << "\n";
    return 1;
  }
  return rc;
}
