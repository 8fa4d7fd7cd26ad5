// prism bench train: training-step throughput of Prism's C++ trainer against a
// PyTorch eager reference loop (same model, dtype, threads, random tokens), a
// Prism schedule against the uniform one, and model FLOPs utilisation against
// this machine's measured matmul peak.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>
#include <iostream>

#include "bench.h"
#include "cli.h"
#include "prism/error.h"
#include "prism/model/cost.h"
#include "prism/train/optimizer.h"
#include "prism/train/step.h"
#include "support_paths.h"

namespace prism::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Peak matmul throughput measured here: square n x n matmuls, best of a few.
double matmul_peak_flops(torch::ScalarType dtype, int64_t n = 2048) {
  auto a = torch::randn({n, n}).to(dtype), b = torch::randn({n, n}).to(dtype);
  for (int i = 0; i < 2; ++i) torch::mm(a, b);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    auto t = Clock::now();
    torch::mm(a, b);
    double s = std::chrono::duration<double>(Clock::now() - t).count();
    best = std::max(best, 2.0 * n * n * n / s);
  }
  return best;
}

struct Measured {
  double tokens_per_s = 0;
  double loss = 0;
};

Measured time_prism(const ModelConfig& mc, const HeadSchedule& s, const std::string& backend, bool bf16, int64_t B,
                    int64_t T, int steps, int warmup, const std::string& profile = "") {
  TrainConfig tc;
  tc.device = "cpu";
  tc.threads = torch::get_num_threads();
  tc.dtype = bf16 ? "bf16" : "fp32";
  Execution exec = resolve_execution(tc);
  torch::manual_seed(0);
  GPT model(mc, s, attention::parse_backend(backend));
  auto opt = make_adamw(*model, tc);
  BatchSource next = random_token_batches(mc.vocab_size, B, T, 1);
  Measured m;
  for (int i = 0; i < warmup; ++i) optimizer_step(model, *opt, exec, next, 1, 1.0);
  std::unique_ptr<torch::autograd::profiler::RecordProfile> prof;
  if (!profile.empty()) prof = std::make_unique<torch::autograd::profiler::RecordProfile>(profile);
  auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) m.loss = optimizer_step(model, *opt, exec, next, 1, 1.0).loss;
  m.tokens_per_s = static_cast<double>(B * T * steps) / std::chrono::duration<double>(Clock::now() - t0).count();
  return m;
}

Measured time_pytorch(const std::string& python, const ModelConfig& mc, const HeadSchedule& s, bool bf16, int64_t B,
                      int64_t T, int steps, int warmup) {
  std::string cmd = fmt::format(
      "'{}' '{}/test/reference/train_reference.py' --d-model {} --heads {} --vocab {} --block {} --batch {} --seq {} "
      "--steps {} --warmup {} --dtype {} --threads {} 2>&1",
      python, reference_source_dir(), mc.d_model, fmt::join(s.heads(), ","), mc.vocab_size, mc.block_size, B, T, steps,
      warmup, bf16 ? "bf16" : "fp32", torch::get_num_threads());
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = p ? pclose(p) : -1;
  auto brace = out.rfind('{');
  if (rc != 0 || brace == std::string::npos)
    throw Error("the PyTorch reference loop failed: " + out, cmd, "check that the venv has torch (scripts/setup.sh), or pass --no-reference");
  auto j = nlohmann::json::parse(out.substr(brace));
  return {j["tokens_per_s"].get<double>(), j["loss"].get<double>()};
}

const char* kUsage =
    "[options]\n\n"
    "Times full training steps (forward, backward, clip, AdamW) on random tokens for the\n"
    "uniform and a Prism schedule, and the same uniform model in a PyTorch eager loop\n"
    "(test/reference/train_reference.py) with the same dtype and threads. Prints tokens/s,\n"
    "ratios, and MFU against the matmul peak measured in the same run.";

int run(const std::vector<std::string>& args) {
  return guarded("bench train", [&]() -> int {
    po::options_description o("Options");
    o.add_options()
        ("model", po::value<std::string>()->default_value("cpu-256"), "model preset")
        ("heads", po::value<std::string>(), "Prism schedule (default: the first enumerated wide-to-narrow staircase)")
        ("batch", po::value<int64_t>()->default_value(8), "micro-batch B")
        ("seq", po::value<int64_t>()->default_value(256), "sequence length T")
        ("steps", po::value<int>()->default_value(10), "timed steps")
        ("warmup", po::value<int>()->default_value(3), "untimed warm-up steps")
        ("dtype", po::value<std::string>()->default_value("both"), "fp32 | bf16 | both")
        ("backend", po::value<std::string>()->default_value("auto"), "attention back end")
        ("threads", po::value<int>()->default_value(0), "intra-op threads (0: all cores)")
        ("no-reference", po::bool_switch(), "skip the PyTorch reference loop")
        ("profile", po::value<std::string>(), "write a Chrome trace of the timed Prism steps (uniform) to this file")
        ("python", po::value<std::string>()->default_value(reference_python()), "Python with torch for the reference");
    po::positional_options_description pos;
    po::variables_map vm;
    if (!parse("bench train", kUsage, o, pos, args, vm)) return 0;
    ModelConfig mc = model_preset(vm["model"].as<std::string>());
    const int64_t B = vm["batch"].as<int64_t>(), T = vm["seq"].as<int64_t>();
    if (T > mc.block_size) throw Error(fmt::format("--seq {} exceeds the model's block size {}", T, mc.block_size), "prism bench train", "lower --seq");
    const int steps = vm["steps"].as<int>(), warmup = vm["warmup"].as<int>();
    int threads = vm["threads"].as<int>();
    torch::set_num_threads(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
    HeadSchedule uniform = HeadSchedule::uniform(mc.n_layer, mc.n_head);
    HeadSchedule prism = vm.count("heads") ? HeadSchedule::parse(vm["heads"].as<std::string>())
                                           : HeadSchedule::from_staircase({{mc.head_dim_base() * 4, 2}, {mc.head_dim_base() * 2, 2},
                                                                           {mc.head_dim_base(), mc.n_layer - 4}}, mc.d_model);
    require_valid_schedule(prism, mc.n_layer, mc.d_model, mc.n_head);
    const std::string backend = vm["backend"].as<std::string>();
    const std::string dt = vm["dtype"].as<std::string>();
    std::vector<bool> dtypes;
    if (dt == "fp32" || dt == "both") dtypes.push_back(false);
    if (dt == "bf16" || dt == "both") dtypes.push_back(true);
    if (dtypes.empty()) throw Error("unknown --dtype " + dt, "prism bench train", "use fp32, bf16 or both");

    const double flops_per_token = model_cost(mc, uniform, static_cast<int>(T)).train_flops_per_token;
    std::cout << "prism bench train: training steps (forward + backward + clip + AdamW), random tokens\n";
    std::cout << "machine: " << machine_description() << "\n";
    std::cout << fmt::format("model: {} ({} layers x {}, vocab {}), B={} T={}, {} timed steps after {} warm-up, attention {}\n",
                             vm["model"].as<std::string>(), mc.n_layer, mc.d_model, mc.vocab_size, B, T, steps, warmup, backend);
    std::cout << fmt::format("training FLOPs per token (6N + attention, as nanoGPT counts): {:.3f} GFLOP\n\n", flops_per_token / 1e9);
    std::cout << fmt::format("{:<5} {:<34} {:>10} {:>11} {:>11} {:>12}\n", "dtype", "run", "tokens/s", "vs PyTorch",
                             "vs uniform", "MFU");
    for (bool bf16 : dtypes) {
      const double peak = matmul_peak_flops(bf16 ? torch::kBFloat16 : torch::kFloat);
      const char* name = bf16 ? "bf16" : "fp32";
      Measured ref;
      if (!vm["no-reference"].as<bool>()) {
        ref = time_pytorch(vm["python"].as<std::string>(), mc, uniform, bf16, B, T, steps, warmup);
        std::cout << fmt::format("{:<5} {:<34} {:>10.0f} {:>11} {:>11} {:>11.1f}%\n", name, "PyTorch eager, uniform",
                                 ref.tokens_per_s, "1.00x", "", 100.0 * ref.tokens_per_s * flops_per_token / peak);
      }
      auto u = time_prism(mc, uniform, backend, bf16, B, T, steps, warmup,
                          vm.count("profile") ? vm["profile"].as<std::string>() + (bf16 ? ".bf16.json" : ".fp32.json") : "");
      auto p = time_prism(mc, prism, backend, bf16, B, T, steps, warmup);
      auto vs_ref = [&](double v) { return ref.tokens_per_s > 0 ? fmt::format("{:.2f}x", v / ref.tokens_per_s) : std::string("-"); };
      std::cout << fmt::format("{:<5} {:<34} {:>10.0f} {:>11} {:>11} {:>11.1f}%\n", name, "Prism C++, uniform " + uniform.compact(),
                               u.tokens_per_s, vs_ref(u.tokens_per_s), "1.00x", 100.0 * u.tokens_per_s * flops_per_token / peak);
      std::cout << fmt::format("{:<5} {:<34} {:>10.0f} {:>11} {:>10.3f}x {:>11.1f}%\n", name, "Prism C++, " + prism.compact(),
                               p.tokens_per_s, vs_ref(p.tokens_per_s), p.tokens_per_s / u.tokens_per_s,
                               100.0 * p.tokens_per_s * flops_per_token / peak);
      std::cout << fmt::format("{:<5} matmul peak measured here: {:.1f} GFLOP/s (2048^3 {} mm)\n\n", "", peak / 1e9, name);
    }
    std::cout << "MFU = tokens/s x training FLOPs per token / measured matmul peak of the same dtype.\n";
    return 0;
  });
}

const BenchRegistration reg{{"train", "training tokens/s vs a PyTorch eager loop; Prism vs uniform; MFU", run}};

}  // namespace
}  // namespace prism::cli
