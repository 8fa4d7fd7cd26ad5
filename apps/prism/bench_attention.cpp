// prism bench attention: forward + backward time and peak extra memory of each
// attention back end, as ratios to SDPA and to the reference measured in the
// same run.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "bench.h"
#include "cli.h"
#include "cpu/attention_cpu.h"
#include "prism/attention/allocation_tracker.h"
#include "prism/attention/attention.h"
#include "prism/attention/fused.h"
#include "prism/error.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "[options]\n\n"
    "Causal self-attention of one layer, forward + backward, for every back end:\n"
    "reference (explicit T x T), sdpa (LibTorch), fused (kernels/cpu) and\n"
    "fused+distance (with the attention-distance telemetry). q, k, v are strided\n"
    "views of one (B, T, 3, H, D) tensor, as the model's qkv projection makes them.\n\n"
    "examples:\n"
    "  prism bench attention\n"
    "  prism bench attention --T 1024 --head-dim 64 --dtype bf16 --backends sdpa,fused --repeat 5";

const std::vector<std::string> kBackends = {"reference", "sdpa", "fused", "fused+distance"};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> v;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) v.push_back(item);
  return v;
}

std::vector<int64_t> int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> v;
  for (const auto& item : split_list(text)) {
    try {
      size_t used = 0;
      v.push_back(std::stoll(item, &used));
      if (used != item.size() || v.back() <= 0) throw std::invalid_argument(item);
    } catch (const std::logic_error&) {
      throw Error(fmt::format("cannot read '{}' in --{} {}", item, flag, text), "command line",
                  fmt::format("give positive integers separated by commas, e.g. --{} 1024,4096", flag));
    }
  }
  return v;
}

template <typename T>
void require_known(const std::vector<std::string>& got, const std::vector<T>& known, const std::string& flag) {
  for (const auto& g : got)
    if (std::find(known.begin(), known.end(), g) == known.end())
      throw Error(fmt::format("unknown value '{}' for --{}", g, flag), "command line",
                  fmt::format("use some of: {}", fmt::join(known, ",")));
}

struct Case {
  int64_t B, T, H, D;
  torch::ScalarType dtype;
};

struct Measure {
  bool ran = false;
  std::string skipped;        // why not, when it did not run
  std::vector<double> rounds;  // forward + backward per timed round, ms
  double ms = 0.0;            // their median
  double peak_mib = 0.0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median over rounds of a's time over base's in the same round: back ends take
// turns, so each ratio compares runs made under the same machine load.
double paired_ratio(const Measure& a, const Measure& base) {
  std::vector<double> r;
  for (size_t i = 0; i < a.rounds.size() && i < base.rounds.size(); ++i) r.push_back(a.rounds[i] / base.rounds[i]);
  return median(r);
}

attention::Options options_for(const std::string& backend) {
  attention::Options o;
  if (backend == "reference") o.backend = attention::Backend::Reference;
  if (backend == "sdpa") o.backend = attention::Backend::Sdpa;
  if (backend == "fused" || backend == "fused+distance") o.backend = attention::Backend::Fused;
  o.want_distance = backend == "fused+distance";
  return o;
}

// Peak of the reference: about three fp32 B*H*T*T tensors alive at once
// (measured: 2.3 GiB at T 4096 with 12 heads, fp32 and bf16 alike), plus margin.
double reference_estimate_gib(const Case& c) {
  return 3.5 * static_cast<double>(c.B * c.H) * static_cast<double>(c.T) * static_cast<double>(c.T) * 4.0 /
         (1024.0 * 1024.0 * 1024.0);
}

double now_ms(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// All back ends of one case, run in turns (warm-up round first, then `repeat`
// timed rounds) so that load from other processes spreads over all of them.
std::map<std::string, Measure> measure(const Case& c, const std::vector<std::string>& backends, int repeat,
                                       double reference_limit_gib, bool cpu_clock, kernels::cpu::Isa isa) {
  std::map<std::string, Measure> res;
  std::vector<std::string> active;
  for (const auto& b : backends) {
    if (b == "reference" && reference_estimate_gib(c) > reference_limit_gib) {
      res[b].skipped = fmt::format("needs ~{:.1f} GiB of T x T buffers (> --reference-limit-gib {})",
                                   reference_estimate_gib(c), reference_limit_gib);
      continue;
    }
    active.push_back(b);
  }
  torch::manual_seed(0);
  auto qkv = torch::randn({c.B, c.T, 3, c.H, c.D}).to(c.dtype);
  auto dout = torch::randn({c.B, c.T, c.H, c.D}).to(c.dtype);
  // Leaves that keep the strided layout of the fused projection.
  auto q = qkv.select(2, 0).detach().requires_grad_();
  auto k = qkv.select(2, 1).detach().requires_grad_();
  auto v = qkv.select(2, 2).detach().requires_grad_();
  for (int r = 0; r <= repeat; ++r) {  // round 0 warms up and measures memory
    for (const auto& b : active) {
      const auto opt = options_for(b);
      for (auto* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
      attention::PeakAllocationScope scope;
      const double t0 = now_ms(cpu_clock);
      {
        attention::Output out;
        if (opt.backend == attention::Backend::Fused) {
          attention::FusedOptions f;
          f.want_distance = opt.want_distance;
          f.isa = isa;
          out = attention::fused_attention(q, k, v, f);
        } else {
          out = attention::causal_attention(q, k, v, opt);
        }
        out.out.backward(dout);
      }
      const double ms = now_ms(cpu_clock) - t0;
      if (r == 0)
        res[b].peak_mib = static_cast<double>(scope.extra_bytes()) / (1024.0 * 1024.0);
      else
        res[b].rounds.push_back(ms);
    }
  }
  for (const auto& b : active) {
    res[b].ms = median(res[b].rounds);
    res[b].ran = true;
  }
  return res;
}

std::string ratio(const Measure& a, const Measure& base) {
  if (!a.ran || !base.ran) return "-";
  return fmt::format("{:.2f}x", paired_ratio(a, base));
}

int run(const std::vector<std::string>& args) {
  return guarded("bench attention", [&] {
    po::options_description o("Options");
    o.add_options()
        ("T", po::value<std::string>()->default_value("1024,4096"), "sequence lengths")
        ("head-dim", po::value<std::string>()->default_value("64,128,256"), "head dims D")
        ("dtype", po::value<std::string>()->default_value("fp32,bf16"), "fp32, bf16")
        ("backends", po::value<std::string>()->default_value("reference,sdpa,fused,fused+distance"),
         "reference, sdpa, fused, fused+distance")
        ("repeat", po::value<int>()->default_value(5), "timed rounds per case (median shown), after one warm-up")
        ("width", po::value<int64_t>()->default_value(768), "layer width: H = width / D heads")
        ("tokens", po::value<int64_t>()->default_value(4096), "tokens per call: B = max(1, tokens / T) sequences")
        ("threads", po::value<int>()->default_value(0), "intra-op threads (0: all cores)")
        ("reference-limit-gib", po::value<double>()->default_value(6.0),
         "skip the reference where its T x T buffers would exceed this")
        ("fused-isa", po::value<std::string>()->default_value(""),
         "code path of the fused kernel: scalar, avx512, avx512_bf16 (default: the best this CPU has)")
        ("clock", po::value<std::string>()->default_value("wall"),
         "wall, or cpu (process CPU time: steadier on a shared machine with --threads 1)");
    po::variables_map vm;
    if (!parse("bench attention", kUsage, o, {}, args, vm)) return 0;

    const auto Ts = int_list(vm["T"].as<std::string>(), "T");
    const auto Ds = int_list(vm["head-dim"].as<std::string>(), "head-dim");
    const auto dtypes = split_list(vm["dtype"].as<std::string>());
    require_known(dtypes, std::vector<std::string>{"fp32", "bf16"}, "dtype");
    auto backends = split_list(vm["backends"].as<std::string>());
    require_known(backends, kBackends, "backends");
    const int repeat = vm["repeat"].as<int>();
    const int64_t width = vm["width"].as<int64_t>(), tokens = vm["tokens"].as<int64_t>();
    if (repeat < 1) throw Error("--repeat must be at least 1", "command line", "use --repeat 3");
    for (auto D : Ds)
      if (width % D != 0)
        throw Error(fmt::format("head dim {} does not divide --width {}", D, width), "command line",
                    "use head dims that divide the width, e.g. 64,128,256 for 768");
    auto isa = kernels::cpu::best_isa();
    if (const auto name = vm["fused-isa"].as<std::string>(); !name.empty()) {
      std::vector<std::string> names;
      for (auto i : {kernels::cpu::Isa::Scalar, kernels::cpu::Isa::Avx512, kernels::cpu::Isa::Avx512Bf16}) {
        names.push_back(kernels::cpu::isa_name(i));
        if (name == names.back()) isa = i;
      }
      require_known({name}, names, "fused-isa");
      if (!kernels::cpu::isa_supported(isa))
        throw Error(fmt::format("this CPU lacks the {} instructions", name), "--fused-isa",
                    fmt::format("use --fused-isa {}", kernels::cpu::isa_name(kernels::cpu::best_isa())));
    }
    const std::string clock = vm["clock"].as<std::string>();
    require_known({clock}, std::vector<std::string>{"wall", "cpu"}, "clock");
    const bool cpu_clock = clock == "cpu";
    int threads = vm["threads"].as<int>();
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    torch::set_num_threads(threads);
    attention::CpuAllocationTracker::install();

    std::cout << "prism bench attention: causal self-attention of one layer, forward + backward\n"
              << "machine: " << machine_description() << "\n"
              << fmt::format("fused kernel: {} code path, {} threads (set with --threads; default all cores)\n",
                             kernels::cpu::isa_name(isa), torch::get_num_threads())
              << fmt::format("shape: width {}, H = {} / D heads, B = max(1, {} / T) sequences; q, k, v strided views "
                             "of one (B, T, 3, H, D) tensor\n",
                             width, width, tokens)
              << fmt::format("time: median of {} {} rounds after a warm-up round, back ends taking turns in each; "
                             "x sdpa, x ref and the telemetry overhead\n  are medians of per-round time ratios "
                             "measured in this run\n",
                             repeat, cpu_clock ? "process-CPU-time" : "wall-clock")
              << "peak extra: peak bytes allocated through LibTorch's CPU allocator during the warm-up forward + "
                 "backward,\n  above the live inputs (outputs, gradients, kernel workspaces, intermediates; "
                 "oneDNN/OpenMP internal scratch not seen)\n\n";
    const std::string head = fmt::format("{:>5} {:>4} {:>5} {:>7}  {:<15} {:>9} {:>7} {:>8} {:>11}  {}", "T", "D",
                                         "dtype", "B x H", "back end", "time ms", "x sdpa", "x ref", "peak MiB", "note");
    std::cout << head << "\n" << std::string(head.size() + 10, '-') << "\n";

    int fused_cases = 0, beats_sdpa = 0, beats_half_ref = 0, ref_cases = 0, telemetry_ok = 0, telemetry_cases = 0;
    for (auto T : Ts)
      for (auto D : Ds)
        for (const auto& dt : dtypes) {
          const auto dtype = dt == "bf16" ? torch::kBFloat16 : torch::kFloat;
          const Case c{std::max<int64_t>(1, tokens / T), T, width / D, D, dtype};
          auto res = measure(c, backends, repeat, vm["reference-limit-gib"].as<double>(), cpu_clock, isa);
          const Measure none;
          const Measure& sdpa = res.count("sdpa") ? res["sdpa"] : none;
          const Measure& ref = res.count("reference") ? res["reference"] : none;
          for (const auto& b : backends) {
            const Measure& m = res[b];
            std::string note = m.skipped.empty() ? "" : "skipped: " + m.skipped;
            if (b == "fused+distance" && m.ran && res.count("fused") && res["fused"].ran) {
              const double overhead = paired_ratio(m, res["fused"]) - 1.0;
              note = fmt::format("telemetry overhead {:+.1f}% vs fused", 100.0 * overhead);
              ++telemetry_cases;
              telemetry_ok += overhead <= 0.05;
            }
            if (b == "fused" && m.ran) {
              if (sdpa.ran) {
                ++fused_cases;
                beats_sdpa += paired_ratio(m, sdpa) <= 1.0;
              }
              if (ref.ran) {
                ++ref_cases;
                beats_half_ref += paired_ratio(m, ref) <= 0.5;
              }
            }
            std::cout << fmt::format("{:>5} {:>4} {:>5} {:>7}  {:<15} {:>9} {:>7} {:>8} {:>11}  {}\n", T, D, dt,
                                     fmt::format("{}x{}", c.B, c.H), b, m.ran ? fmt::format("{:.1f}", m.ms) : "-",
                                     ratio(m, sdpa), ratio(m, ref), m.ran ? fmt::format("{:.1f}", m.peak_mib) : "-",
                                     note);
          }
          std::cout << std::flush;
        }
    std::cout << fmt::format(
        "\ntargets: fused <= 1.0x sdpa in {}/{} cases; fused <= 0.5x reference in {}/{}; telemetry overhead <= 5% in "
        "{}/{}\n",
        beats_sdpa, fused_cases, beats_half_ref, ref_cases, telemetry_ok, telemetry_cases);
    // Growth with T at one fixed small shape: linear for O(T) memory, x(T ratio)^2 for T x T buffers.
    if (Ts.size() >= 2) {
      const int64_t t0 = *std::min_element(Ts.begin(), Ts.end()), t1 = *std::max_element(Ts.begin(), Ts.end());
      std::cout << fmt::format("\npeak extra memory growth, B = H = 1, D = 64, fp32, T {} -> {} (x{} tokens):\n", t0, t1,
                               t1 / t0);
      for (const auto& b : backends) {
        const Case small0{1, t0, 1, 64, torch::kFloat}, small1{1, t1, 1, 64, torch::kFloat};
        const double m0 = measure(small0, {b}, 1, 1e9, cpu_clock, isa)[b].peak_mib;
        const double m1 = measure(small1, {b}, 1, 1e9, cpu_clock, isa)[b].peak_mib;
        std::cout << fmt::format("  {:<15} {:>9.2f} MiB -> {:>9.2f} MiB  (x{:.1f})\n", b, m0, m1, m1 / m0);
      }
    }
    return 0;
  });
}

const BenchRegistration reg{
    {"attention", "attention back ends: forward+backward time and peak memory vs sdpa and reference", run}};

}  // namespace
}  // namespace prism::cli
