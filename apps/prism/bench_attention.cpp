// prism bench attention: forward + backward time, peak extra memory and a
// correctness check of each attention back end (lib/prism/ops/attention_benchmark.h),
// printed as ratios to SDPA and to the reference measured in the same run.
#include <ATen/Version.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench.h"
#include "cli.h"
#include "prism/ops/allocation_tracker.h"
#include "prism/ops/attention_benchmark.h"
#include "prism/ops/attention_fused.h"
#include "prism/ops/cpu_code_paths.h"
#include "prism/error.h"
#include "prism/format.h"
#include "prism/train/cpu_dtype_probe.h"
#include "prism/train/execution.h"

namespace prism::cli {
namespace {

const char* kUsage =
    "[options]\n\n"
    "Causal self-attention of one layer, forward + backward, for every back end:\n"
    "reference (explicit T x T), sdpa (LibTorch), fused (kernels/cpu) and\n"
    "fused+distance (with the attention-distance telemetry). q, k, v are strided\n"
    "views of one (B, T, 3, H, D) tensor, as the model's qkv projection makes them.\n"
    "Each back end's output, gradients and distance are checked against the reference's\n"
    "(or SDPA's where the reference is skipped); a case that fails is reported, the\n"
    "others still run, and the command then exits non-zero.\n\n"
    "--isa picks the fused kernel's code path (instruction set), e.g. avx2 on an\n"
    "AVX-512 machine; the environment variable PRISM_CPU_ISA does the same for every\n"
    "command. LibTorch's own code path is set by ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS\n"
    "and ONEDNN_MAX_CPU_ISA (e.g. =avx2 / AVX2 / AVX2 to stand in for an AVX2-only CPU).\n\n"
    "examples:\n"
    "  prism bench attention\n"
    "  prism bench attention --T 1024 --head-dim 64 --dtype bf16 --backends sdpa,fused --repeat 5\n"
    "  prism bench attention --isa avx2 --dtype fp32";

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

void require_known(const std::vector<std::string>& got, const std::vector<std::string>& known,
                   const std::string& flag) {
  for (const auto& g : got)
    if (std::find(known.begin(), known.end(), g) == known.end())
      throw Error(fmt::format("unknown value '{}' for --{}", g, flag), "command line",
                  fmt::format("use some of: {}", fmt::join(known, ",")));
}

using attention::BackendRun;

std::string ratio(const BackendRun& a, const BackendRun& base) {
  if (!a.ran || !base.ran) return "-";
  return fmt::format("{:.2f}x", attention::paired_ratio(a, base));
}

std::string check_note(const BackendRun& m) {
  if (m.checked_against.empty()) return "";
  return fmt::format("{} vs {}: max rel err {:.1e} ({})", m.correct ? "ok" : "WRONG", m.checked_against, m.error,
                     m.worst);
}

// Targets of issue 18, counted over the cases that ran.
struct Tally {
  int fused_cases = 0, beats_sdpa = 0, ref_cases = 0, beats_half_ref = 0, telemetry_cases = 0, telemetry_ok = 0;
  int failed_checks = 0, failed_cases = 0;
};

// Counts one back end's result of a case against the targets; returns its timing note.
std::string tally_backend(const std::string& b, const BackendRun& m, std::map<std::string, BackendRun>& res,
                          const BackendRun& sdpa, const BackendRun& ref, Tally& tally) {
  if (b == "fused+distance" && m.ran && res.count("fused") && res["fused"].ran) {
    const double overhead = attention::paired_ratio(m, res["fused"]) - 1.0;
    ++tally.telemetry_cases;
    tally.telemetry_ok += overhead <= 0.05;
    return fmt::format("telemetry {:+.1f}% vs fused", 100.0 * overhead);
  }
  if (b == "fused" && m.ran && sdpa.ran) {
    ++tally.fused_cases;
    tally.beats_sdpa += attention::paired_ratio(m, sdpa) <= 1.0;
  }
  if (b == "fused" && m.ran && ref.ran) {
    ++tally.ref_cases;
    tally.beats_half_ref += attention::paired_ratio(m, ref) <= 0.5;
  }
  return m.skipped.empty() ? "" : "skipped: " + m.skipped;
}

void print_case(const attention::BenchCase& c, const std::string& dt, const std::vector<std::string>& backends,
                std::map<std::string, BackendRun>& res, Tally& tally) {
  const BackendRun none;
  const BackendRun& sdpa = res.count("sdpa") ? res["sdpa"] : none;
  const BackendRun& ref = res.count("reference") ? res["reference"] : none;
  for (const auto& b : backends) {
    const BackendRun& m = res[b];
    std::string note = tally_backend(b, m, res, sdpa, ref, tally);
    if (!m.checked_against.empty()) {
      note += (note.empty() ? "" : "; ") + check_note(m);
      tally.failed_checks += !m.correct;
    }
    std::cout << fmt::format("{:>5} {:>4} {:>5} {:>7}  {:<15} {:>9} {:>7} {:>8} {:>11}  {}\n", c.T, c.D, dt,
                             fmt::format("{}x{}", c.B, c.H), b, m.ran ? fmt::format("{:.1f}", m.ms) : "-",
                             ratio(m, sdpa), ratio(m, ref), m.ran ? fmt::format("{:.1f}", m.peak_mib) : "-", note);
  }
  std::cout << std::flush;
}

po::options_description attention_options() {
  po::options_description o("Options");
  o.add_options()
      ("T", po::value<std::string>()->default_value("1024,4096"), "sequence lengths")
      ("head-dim", po::value<std::string>()->default_value("64,128,256"), "head dims D")
      ("dtype", po::value<std::string>()->default_value("auto"),
       "fp32, bf16, or auto: fp32, and bf16 where it has a fast path here (measured)")
      ("backends", po::value<std::string>()->default_value("reference,sdpa,fused,fused+distance"),
       "reference, sdpa, fused, fused+distance")
      ("repeat", po::value<int>()->default_value(5), "timed rounds per case (median shown), after one warm-up")
      ("width", po::value<int64_t>()->default_value(768), "layer width: H = width / D heads")
      ("tokens", po::value<int64_t>()->default_value(4096), "tokens per call: B = max(1, tokens / T) sequences")
      ("threads", po::value<int>()->default_value(0), "intra-op threads (0: all cores)")
      ("reference-limit-gib", po::value<double>()->default_value(6.0),
       "skip the reference where its T x T buffers would exceed this")
      ("isa", po::value<std::string>()->default_value(""),
       "code path of the fused kernel, e.g. avx512_bf16, avx512, avx2, portable, scalar (default: the best this "
       "CPU has, or PRISM_CPU_ISA)")
      ("no-check", po::bool_switch(), "skip the correctness check")
      ("clock", po::value<std::string>()->default_value("wall"),
       "wall, or cpu (process CPU time: steadier on a shared machine with --threads 1)");
  return o;
}

// The cases to run (T x D x dtype) and how each is measured.
struct Plan {
  std::vector<int64_t> Ts, Ds;
  std::vector<std::string> dtypes;
  MatmulRates rates;            // this CPU's, at the benchmark's threads
  bool bf16_emulated = false;   // no fast bf16 path here: one timed round per bf16 case
  bool bf16_left_out = false;   // --dtype auto dropped bf16 for that reason
  int64_t width = 0, tokens = 0;
  attention::CpuCodePath path;
  attention::BenchSettings settings;
};

attention::BenchSettings read_bench_settings(const po::variables_map& vm) {
  attention::BenchSettings settings;
  settings.backends = split_list(vm["backends"].as<std::string>());
  require_known(settings.backends, attention::bench_backend_names(), "backends");
  settings.repeat = vm["repeat"].as<int>();
  if (settings.repeat < 1) throw Error("--repeat must be at least 1", "command line", "use --repeat 3");
  settings.reference_limit_gib = vm["reference-limit-gib"].as<double>();
  settings.check = !vm["no-check"].as<bool>();
  const std::string clock = vm["clock"].as<std::string>();
  require_known({clock}, {"wall", "cpu"}, "clock");
  settings.cpu_clock = clock == "cpu";
  return settings;
}

Plan read_plan(const po::variables_map& vm) {
  Plan p;
  p.Ts = int_list(vm["T"].as<std::string>(), "T");
  p.Ds = int_list(vm["head-dim"].as<std::string>(), "head-dim");
  p.dtypes = split_list(vm["dtype"].as<std::string>());
  p.rates = cpu_matmul_rates();
  p.bf16_emulated = bf16_emulated(p.rates, cpu_supports_bf16());
  if (p.dtypes == std::vector<std::string>{"auto"}) {
    p.dtypes = {"fp32"};
    if (p.bf16_emulated) p.bf16_left_out = true;
    else p.dtypes.push_back("bf16");
  }
  require_known(p.dtypes, {"fp32", "bf16"}, "dtype");
  p.settings = read_bench_settings(vm);
  p.width = vm["width"].as<int64_t>();
  p.tokens = vm["tokens"].as<int64_t>();
  for (auto D : p.Ds)
    if (p.width % D != 0)
      throw Error(fmt::format("head dim {} does not divide --width {}", D, p.width), "command line",
                  "use head dims that divide the width, e.g. 64,128,256 for 768");
  // Without --isa each dtype takes the fused kernel's own default (fused_code_path: bf16's is measured).
  p.path = vm["isa"].as<std::string>().empty() ? attention::default_cpu_code_path()
                                                : attention::cpu_code_path(vm["isa"].as<std::string>(), "--isa");
  p.settings.code_path = vm["isa"].as<std::string>();
  return p;
}

// Where this CPU's bf16 code path was measured (fused_code_path), the choice and why.
std::string bf16_path_line(const Plan& p) {
  if (!p.settings.code_path.empty() || std::find(p.dtypes.begin(), p.dtypes.end(), "bf16") == p.dtypes.end())
    return "";
  attention::fused_code_path(torch::kBFloat16);  // measures (or reads the cache) once
  const std::string why = attention::bf16_code_path_reason();
  return why.empty() ? "" : "fused kernel, " + why + "\n";
}

// The settings a case runs with: one timed round where bf16 is emulated (its ratio needs no more).
attention::BenchSettings case_settings(const Plan& p, const std::string& dtype) {
  attention::BenchSettings s = p.settings;
  if (dtype == "bf16" && p.bf16_emulated) s.repeat = 1;
  return s;
}

// bf16 left out or cut short where it is emulated, and the ETA of every case from this CPU's matmul
// rates: a rough guide (each back end as 12 B H T^2 D FLOPs a round, forward and backward; the fused
// kernel's bf16 runs at fp32's rate).
std::string dtype_lines(const Plan& p) {
  std::string out;
  const std::string measured = fmt::format("bf16 matmuls ran {:.3g}x fp32's here ({}^3: bf16 {:.3g}, fp32 {:.3g} GFLOP/s)",
                                           p.rates.bf16_over_fp32(), p.rates.n, p.rates.bf16_gflops, p.rates.fp32_gflops);
  if (p.bf16_left_out)
    out += "bf16: left out: no fast bf16 path on this CPU (" + measured +
           "; LibTorch emulates it, minutes a call at T 4096); --dtype fp32,bf16 times it anyway, one round a case\n";
  else if (p.bf16_emulated && std::find(p.dtypes.begin(), p.dtypes.end(), "bf16") != p.dtypes.end())
    out += "bf16: no fast bf16 path on this CPU (" + measured + "): one timed round per bf16 case, which gives its ratios\n";
  double seconds = 0;
  for (auto T : p.Ts)
    for (auto D : p.Ds)
      for (const auto& dt : p.dtypes) {
        const double B = static_cast<double>(std::max<int64_t>(1, p.tokens / T)), H = static_cast<double>(p.width / D);
        const double flops = 12.0 * B * H * static_cast<double>(T) * static_cast<double>(T) * static_cast<double>(D);
        const int rounds = case_settings(p, dt).repeat + 1;
        for (const auto& b : p.settings.backends) {
          const bool libtorch = b == "reference" || b == "sdpa";
          const double gflops = dt == "bf16" && libtorch ? p.rates.bf16_gflops : p.rates.fp32_gflops;
          seconds += rounds * flops / std::max(gflops * 1e9, 1.0);
        }
      }
  out += fmt::format("ETA: about {} (every case's attention FLOPs at this CPU's matmul rates; a rough guide)\n",
                     format_duration(seconds));
  return out;
}

void print_header(const Plan& p) {
  const auto& settings = p.settings;
  std::cout << "prism bench attention: causal self-attention of one layer, forward + backward\n"
            << "machine: " << machine_description() << "\n"
            << fmt::format("fused kernel: code path {} ({}), {} threads (set with --threads; default all cores)\n",
                           p.path.name, p.path.description, torch::get_num_threads())
            << bf16_path_line(p)
            << fmt::format("LibTorch (sdpa, reference): CPU capability {}\n", at::get_cpu_capability())
            << fmt::format("shape: width {}, H = {} / D heads, B = max(1, {} / T) sequences; q, k, v strided views "
                           "of one (B, T, 3, H, D) tensor\n",
                           p.width, p.width, p.tokens)
            << fmt::format("time: median of {} {} rounds after a warm-up round, back ends taking turns in each; "
                           "x sdpa, x ref and the telemetry overhead\n  are medians of per-round time ratios "
                           "measured in this run\n",
                           settings.repeat, settings.cpu_clock ? "process-CPU-time" : "wall-clock")
            << "peak extra: peak bytes allocated through LibTorch's CPU allocator during the warm-up forward + "
               "backward,\n  above the live inputs (outputs, gradients, kernel workspaces, intermediates; "
               "oneDNN/OpenMP internal scratch not seen)\n";
  if (settings.check)
    std::cout << fmt::format("check: out, dq, dk, dv (and distance) of the warm-up round against the reference "
                             "(sdpa where it is skipped), relative error in the Frobenius norm <= {:.0e} fp32, "
                             "{:.0e} bf16\n",
                             attention::bench_check_tolerance(torch::kFloat),
                             attention::bench_check_tolerance(torch::kBFloat16));
  std::cout << dtype_lines(p);
  const std::string head = fmt::format("{:>5} {:>4} {:>5} {:>7}  {:<15} {:>9} {:>7} {:>8} {:>11}  {}", "T", "D",
                                       "dtype", "B x H", "back end", "time ms", "x sdpa", "x ref", "peak MiB", "note");
  std::cout << "\n" << head << "\n" << std::string(head.size() + 10, '-') << "\n";
}

// Every T x D x dtype case, one table block each; a case that throws is reported and counted.
Tally run_cases(const Plan& p) {
  Tally tally;
  for (auto T : p.Ts)
    for (auto D : p.Ds)
      for (const auto& dt : p.dtypes) {
        const attention::BenchCase c{std::max<int64_t>(1, p.tokens / T), T, p.width / D, D,
                                     dt == "bf16" ? torch::kBFloat16 : torch::kFloat};
        try {
          auto res = attention::bench_attention_case(c, case_settings(p, dt));
          print_case(c, dt, p.settings.backends, res, tally);
        } catch (const std::exception& e) {
          ++tally.failed_cases;
          std::cout << fmt::format("{:>5} {:>4} {:>5} {:>7}  FAILED: {}\n", T, D, dt, fmt::format("{}x{}", c.B, c.H),
                                   e.what())
                    << std::flush;
        }
      }
  return tally;
}

// Growth with T at one fixed small shape: linear for O(T) memory, x(T ratio)^2 for T x T buffers.
void print_memory_growth(const Plan& p) {
  const int64_t t0 = *std::min_element(p.Ts.begin(), p.Ts.end()), t1 = *std::max_element(p.Ts.begin(), p.Ts.end());
  std::cout << fmt::format("\npeak extra memory growth, B = H = 1, D = 64, fp32, T {} -> {} (x{} tokens):\n", t0, t1,
                           t1 / t0);
  attention::BenchSettings once = p.settings;
  once.repeat = 1;
  once.reference_limit_gib = 1e9;
  once.check = false;
  for (const auto& b : p.settings.backends) {
    once.backends = {b};
    const double m0 = attention::bench_attention_case({1, t0, 1, 64, torch::kFloat}, once)[b].peak_mib;
    const double m1 = attention::bench_attention_case({1, t1, 1, 64, torch::kFloat}, once)[b].peak_mib;
    std::cout << fmt::format("  {:<15} {:>9.2f} MiB -> {:>9.2f} MiB  (x{:.1f})\n", b, m0, m1, m1 / m0);
  }
}

int run(const std::vector<std::string>& args) {
  return guarded("bench attention", [&] {
    po::variables_map vm;
    if (!parse("bench attention", kUsage, attention_options(), {}, args, vm)) return 0;
    const int threads = vm["threads"].as<int>();
    torch::set_num_threads(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    const Plan plan = read_plan(vm);
    attention::CpuAllocationTracker::install();
    print_header(plan);
    const Tally tally = run_cases(plan);
    std::cout << fmt::format(
        "\ntargets: fused <= 1.0x sdpa in {}/{} cases; fused <= 0.5x reference in {}/{}; telemetry overhead <= 5% in "
        "{}/{}\n",
        tally.beats_sdpa, tally.fused_cases, tally.beats_half_ref, tally.ref_cases, tally.telemetry_ok,
        tally.telemetry_cases);
    if (plan.Ts.size() >= 2) print_memory_growth(plan);
    if (tally.failed_checks + tally.failed_cases == 0) return 0;
    std::cout << fmt::format("\nFAILED: {} back-end check(s) out of tolerance, {} case(s) that did not run\n",
                             tally.failed_checks, tally.failed_cases);
    return 1;
  });
}

const BenchRegistration reg{
    {"attention", "attention back ends: forward+backward time, peak memory and a correctness check vs sdpa and "
                  "reference", run}};

}  // namespace
}  // namespace prism::cli
