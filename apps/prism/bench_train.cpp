// prism bench train: training-step throughput of Prism's C++ trainer against a
// PyTorch eager reference loop (same model, dtype, threads, random tokens), a
// Prism schedule against the uniform one, and model FLOPs utilisation against
// this machine's measured matmul peak.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include <unistd.h>

#include <ATen/Version.h>

#include "bench.h"
#include "cli.h"
#include "prism/config/cost.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/format.h"
#include "prism/ops/adamw.h"
#include "prism/ops/add_layer_norm.h"
#include "prism/ops/attention.h"
#include "prism/ops/attention_fused.h"
#include "prism/ops/bias_gelu.h"
#include "prism/ops/cpu_code_paths.h"
#include "prism/ops/rope.h"
#include "prism/stats/stats.h"
#include "prism/train/cpu_dtype_probe.h"
#include "prism/train/execution.h"
#include "prism/train/host_memory.h"
#include "prism/train/op_profile.h"
#include "prism/train/optimizer.h"
#include "prism/train/step.h"
#include "prism/train/step_probe.h"
#include "prism/train/turn_timing.h"
#include "support_paths.h"

namespace prism::cli {
namespace {

using Clock = std::chrono::steady_clock;

double now_s(bool cpu_clock) { return bench_clock_seconds(cpu_clock ? BenchClock::ProcessCpu : BenchClock::Wall); }

// Peak matmul throughput measured here: square n x n matmuls on the clock the
// steps are timed with. One measurement taken under contention is not a peak, so
// rounds are taken before the timed steps and between them, and the peak is the
// best round.
class PeakMeter {
 public:
  PeakMeter(torch::ScalarType dtype, bool cpu_clock, int64_t n = 2048)
      : a_(torch::randn({n, n}).to(dtype)), b_(torch::randn({n, n}).to(dtype)), n_(n), cpu_clock_(cpu_clock) {
    torch::mm(a_, b_);  // warm: first-touch pages, oneDNN's kernel selection
  }
  void round(int matmuls = 1) {
    for (int i = 0; i < matmuls; ++i) {
      const double t = now_s(cpu_clock_);
      torch::mm(a_, b_);
      best_ = std::max(best_, 2.0 * static_cast<double>(n_ * n_ * n_) / (now_s(cpu_clock_) - t));
      ++rounds_;
    }
  }
  double best() const { return best_; }
  int rounds() const { return rounds_; }
  int64_t n() const { return n_; }

 private:
  torch::Tensor a_, b_;
  int64_t n_;
  bool cpu_clock_;
  double best_ = 0;
  int rounds_ = 0;
};

// MFU as a percentage, or a flag when it is above 100%: the peak was measured
// too low (contention during every round), which is a measurement problem.
std::string mfu_text(double tokens_per_s, double flops_per_token, double peak) {
  const double mfu = 100.0 * tokens_per_s * flops_per_token / peak;
  return mfu > 100.0 ? std::string("n/a (>100%)") : fmt::format("{:.1f}%", mfu);
}

struct Measured {
  double tokens_per_s = 0;
  double loss = 0;
};

// A line on stderr every ~10 s while a run is long, so a slow machine is seen working.
class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)), start_(Clock::now()), last_(start_) {
    std::cerr << fmt::format("bench train: {} ...\n", what_) << std::flush;
  }
  void step(const char* phase, int done, int total) {
    const auto now = Clock::now();
    if (now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    std::cerr << fmt::format("bench train: {}: {} step {}/{}, {:.0f} s\n", what_, phase, done, total,
                             std::chrono::duration<double>(now - start_).count())
              << std::flush;
  }

 private:
  std::string what_;
  Clock::time_point start_, last_;
};


// What one `prism bench train` invocation measures, read and checked from its options.
struct Settings {
  std::string model_name;
  ModelConfig mc;
  std::string vocab_source;  // with --config: where the vocabulary came from
  HeadSchedule uniform, prism;
  int64_t B = 0, T = 0;
  int steps = 0, warmup = 0;
  std::string backend;
  std::string dtype;        // the --dtype given
  std::vector<bool> dtypes;  // bf16? per measured dtype, in order
  MatmulRates rates;         // this CPU's matmul rates at these threads (cpu_dtype_probe.h)
  bool bf16_emulated = false;  // bf16 has no fast path here: timed with the fewest steps that give its ratio
  bool with_eager = false, with_compiled = false;
  bool cpu_clock = false;
  bool prism_malloc = false;  // the PyTorch loops under Prism's glibc setting
  int profile_steps = 0, profile_top = 0;
  std::string profile;  // Chrome trace path prefix, "" for none
  std::string python;
};

struct PairResult {
  Measured uniform, prism;
  double ratio = 0;  // Prism / uniform tokens/s: median over steps of the paired time ratios
  Interval ratio_ci{std::nan(""), std::nan("")};  // 95% distribution-free interval of that median
  double ratio_coverage = std::nan("");
  OpProfileResult uniform_profile, prism_profile;
};

// Where each arm's step time goes, over `steps` more steps (after the timed ones:
// the profiler's hooks cost time).
void profile_arms(TrainingArm& u, TrainingArm& p, int steps, PairResult& r) {
  std::cerr << fmt::format("bench train: profiling {} more steps of each arm (--profile-summary) ...\n", steps)
            << std::flush;
  auto profile = [steps](TrainingArm& arm) {
    OpProfiler profiler;
    for (int i = 0; i < steps; ++i) arm.step();
    OpProfileResult result = profiler.stop();
    result.steps = steps;
    return result;
  };
  r.uniform_profile = profile(u);
  r.prism_profile = profile(p);
}

// Uniform and Prism take turns step by step (warm-up, then timed), so load
// from other processes spreads over both and the ratio compares steps made
// under the same conditions.
PairResult time_pair(const Settings& s, bool bf16, const std::string& trace, PeakMeter& peak) {
  TrainingArm u(s.mc, s.uniform, s.backend, bf16, s.B, s.T), p(s.mc, s.prism, s.backend, bf16, s.B, s.T);
  Progress progress(fmt::format("{} Prism C++ {} and {}, steps taking turns", bf16 ? "bf16" : "fp32",
                                s.uniform.compact(), s.prism.compact()));
  PairResult r;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> prof;
  TurnPlan plan;
  plan.warmup = s.warmup;
  plan.steps = s.steps;
  plan.clock = s.cpu_clock ? BenchClock::ProcessCpu : BenchClock::Wall;
  plan.after_round = [&](const char* phase, int done, int total) {
    if (std::string(phase) == "timed" && done % 2 == 0) peak.round();  // between the steps, outside their timing
    progress.step(phase, done, total);
  };
  plan.before_timed = [&] {
    if (!trace.empty()) prof = std::make_unique<torch::autograd::profiler::RecordProfile>(trace);
  };
  const auto seconds = time_in_turns({[&] { r.uniform.loss = u.step(); }, [&] { r.prism.loss = p.step(); }}, plan);
  prof.reset();
  if (s.profile_steps > 0) profile_arms(u, p, s.profile_steps, r);
  const double tokens = static_cast<double>(s.B * s.T * s.steps);
  r.uniform.tokens_per_s = tokens / std::accumulate(seconds[0].begin(), seconds[0].end(), 0.0);
  r.prism.tokens_per_s = tokens / std::accumulate(seconds[1].begin(), seconds[1].end(), 0.0);
  const PairedRatio ratio = paired_ratio(seconds[0], seconds[1]);  // uniform's time over Prism's: Prism's speed-up
  r.ratio = ratio.median;
  r.ratio_ci = ratio.ci;
  r.ratio_coverage = ratio.coverage;
  return r;
}

struct Reference {
  bool loss_finite = true;  // false: its last loss was NaN or infinite (its time is then suspect)
  Measured m;
  double compile_s = 0;
  int warmup_steps = 0;
};

// torch.compile's code cache does not key its CPU kernels on ATEN_CPU_CAPABILITY and the
// MKL/oneDNN ISA caps: after a run under `ATEN_CPU_CAPABILITY=avx2 ...` (an AVX2
// stand-in) later compiled runs, with or without the caps, loaded the other kind's
// kernels and got NaN losses or heap corruption (PyTorch 2.13, Zen 5). So when any
// cap is set, the reference loops get their own cache directory per setting, unless
// TORCHINDUCTOR_CACHE_DIR names one. Returns the directory ("" for the default).
std::string reference_inductor_cache() {
  if (const char* d = std::getenv("TORCHINDUCTOR_CACHE_DIR"); d && *d) return "";
  std::string tag;
  for (const char* var : {"ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA"})
    if (const char* v = std::getenv(var); v && *v) tag += fmt::format("-{}", v);
  if (tag.empty()) return "";
  for (char& c : tag)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return (std::filesystem::temp_directory_path() / fmt::format("prism-torchinductor-uid{}{}", getuid(), tag)).string();
}

// The shell command of nanoGPT's step on the uniform model in PyTorch
// (test/reference/train_reference.py), eager or under torch.compile.
std::string reference_command(const Settings& st, bool bf16, bool compiled) {
  const ModelConfig& mc = st.mc;
  // --reference-malloc prism: the Python process gets Prism's glibc setting (host_memory.h).
  std::string env = st.prism_malloc ? fmt::format("GLIBC_TUNABLES={} ", kKeepFreedHostMemoryTunables) : "";
  if (const std::string cache = reference_inductor_cache(); !cache.empty())
    env += fmt::format("TORCHINDUCTOR_CACHE_DIR='{}' ", cache);
  return fmt::format(
      "{}'{}' '{}/test/reference/train_reference.py' --d-model {} --heads {} --vocab {} --block {} --batch {} --seq {} "
      "--steps {} --warmup {} --dtype {} --threads {} --clock {} --position {} --rope-theta {}{}",
      env, st.python, reference_source_dir(), mc.d_model, fmt::join(st.uniform.heads(), ","), mc.vocab_size, mc.block_size,
      st.B, st.T, st.steps, st.warmup, bf16 ? "bf16" : "fp32", torch::get_num_threads(), st.cpu_clock ? "cpu" : "wall",
      positions_name(mc.position), mc.rope_theta, compiled ? " --compile" : "");
}

// The reference's last line: a JSON object with tokens_per_s and loss (null when not finite).
Reference parse_reference(const std::string& out, int status, const std::string& cmd, int warmup) {
  auto brace = out.rfind('{');
  if (status != 0 || brace == std::string::npos)
    throw Error("the PyTorch reference loop failed: " + out, cmd, "check that the venv has torch (scripts/setup.sh), or pass --no-reference");
  const auto j = nlohmann::json::parse(out.substr(brace), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("tokens_per_s"))
    throw Error("the PyTorch reference loop printed no result line: " + out, cmd,
                "run that command to see what it printed, or pass --no-reference");
  Reference r;
  r.loss_finite = !j["loss"].is_null();
  r.m = {j["tokens_per_s"].get<double>(), r.loss_finite ? j["loss"].get<double>() : std::nan("")};
  r.compile_s = j.value("compile_s", 0.0);
  r.warmup_steps = j.value("warmup_steps", warmup);
  return r;
}

Reference time_pytorch(const Settings& st, bool bf16, bool compiled) {
  const std::string cmd = reference_command(st, bf16, compiled);
  std::cerr << fmt::format("bench train: {} PyTorch {} reference loop ({}{} + {} steps) ...\n", bf16 ? "bf16" : "fp32",
                           compiled ? "torch.compile" : "eager", compiled ? "compilation, at least " : "", st.warmup, st.steps)
            << std::flush;
  int status = 0;
  const std::string out = capture(cmd, status);
  return parse_reference(out, status, cmd, st.warmup);
}

const char* kUsage =
    "[options]\n\n"
    "Times full training steps (forward, backward, clip, AdamW) on random tokens for the\n"
    "uniform and a Prism schedule, and the same uniform model as nanoGPT runs it in PyTorch\n"
    "(test/reference/train_reference.py: eager, and with --compare compiled under\n"
    "torch.compile, compilation timed apart) with the same dtype and threads. Prints tokens/s,\n"
    "ratios, and MFU against the matmul peak measured in the same run (best of rounds taken\n"
    "between the timed steps; an MFU above 100% is flagged, not printed as a result).\n\n"
    "--dtype auto (the default) runs fp32, and bf16 where it has a fast path here (measured:\n"
    "bf16 matmuls at least 0.25x fp32's; an AVX2-only CPU or a capped ISA emulates bf16 at\n"
    "0.004-0.08x), and one line says when it was skipped. --dtype bf16 or both times emulated\n"
    "bf16 anyway, with the fewest steps that give its ratio (1 warm-up, 2 timed) and its ETA.\n"
    "--profile-summary then profiles a few more steps of each arm and prints where the step's\n"
    "time goes: matmuls, attention, casts, norms/activations, loss, optimizer, zeroing,\n"
    "positions (rotary, with --position rope), ...\n"
    "and the top operations by self time.\n"
    "--config FILE (with --set key=value overrides) takes the model, its vocabulary from the\n"
    "data, the schedule, micro-batch and sequence length from a config, composed as prism\n"
    "train composes it.\n"
    "Progress goes to stderr every ~10 s.";

// The attention back end `backend` resolves to for this model's head dims and
// dtype, with the CPU code path when it is the fused kernel.
std::string attention_path(const std::string& backend, const HeadSchedule& s, const ModelConfig& mc, bool bf16) {
  attention::Options o;
  o.backend = attention::parse_backend(backend);
  std::vector<std::string> parts;
  for (int64_t heads : s.heads()) {
    const auto q = torch::empty({1, 1, heads, mc.d_model / heads}, bf16 ? torch::kBFloat16 : torch::kFloat);
    const auto b = attention::resolve_backend(o, q);
    std::string part = attention::backend_name(b);
    if (b == attention::Backend::Fused) part += " (" + attention::fused_code_path(q.scalar_type()).name + ")";
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

po::options_description bench_options() {
  po::options_description o("Options");
  o.add_options()
      ("config", po::value<std::string>(), "a config file (composed as prism train composes it): its model, vocabulary "
       "(from the data's prepare.json), schedule (the Prism arm, unless uniform), micro-batch and sequence length; "
       "--batch and --seq given explicitly win")
      ("set", po::value<std::vector<std::string>>()->composing(), "an override of --config (repeatable), e.g. --set model=cpu-192 --set train.seq_len=128")
      ("model", po::value<std::string>()->default_value("cpu-256"), "model preset")
      ("vocab", po::value<int64_t>()->default_value(0), "vocabulary size (0: the preset's; 4096: the CPU study's compact vocabulary)")
      ("position", po::value<std::string>()->default_value("learned"), "positions: learned | rope (rotary, every arm and the PyTorch loops)")
      ("rope-theta", po::value<double>()->default_value(10000.0), "rotary base with --position rope")
      ("heads", po::value<std::string>(), "Prism schedule (default: 2 layers of 4x-wide heads, 2 of 2x-wide, the rest the preset's; under 5 layers half 2x-wide, half the preset's)")
      ("batch", po::value<int64_t>()->default_value(8), "micro-batch B")
      ("seq", po::value<int64_t>()->default_value(256), "sequence length T")
      ("steps", po::value<int>()->default_value(10), "timed steps")
      ("warmup", po::value<int>()->default_value(3), "untimed warm-up steps")
      ("dtype", po::value<std::string>()->default_value("auto"), "auto | fp32 | bf16 | both (auto: bf16 only where it has a fast path here, measured)")
      ("backend", po::value<std::string>()->default_value("auto"), "attention back end")
      ("threads", po::value<int>()->default_value(0), "intra-op threads (0: all cores)")
      ("compare", po::value<std::string>()->default_value("eager"),
       "PyTorch reference loops to time: eager | compiled (torch.compile) | both | none")
      ("no-reference", po::bool_switch(), "same as --compare none")
      ("profile-summary", po::bool_switch(), "profile a few more steps per dtype and arm and print where the time goes")
      ("profile-top", po::value<int>()->default_value(12), "operations the profile summary lists by self time")
      ("profile", po::value<std::string>(), "write a Chrome trace of the timed steps (uniform and Prism) to this file")
      ("clock", po::value<std::string>()->default_value("wall"),
       "wall, or cpu (process CPU time, for Prism and the PyTorch loops alike: steadier on a shared machine with --threads 1)")
      ("reference-malloc", po::value<std::string>()->default_value("system"),
       "system: the PyTorch loops run with the C library's allocator defaults, as a researcher runs them; prism: "
       "with the setting Prism's own process makes (freed memory kept for reuse), for a like-for-like comparison")
      ("python", po::value<std::string>()->default_value(reference_python()), "Python with torch for the reference");
  return o;
}

// --model, --vocab, --position and --rope-theta.
ModelConfig bench_model(const po::variables_map& vm) {
  ModelConfig mc = model_preset(vm["model"].as<std::string>());
  if (const int64_t v = vm["vocab"].as<int64_t>(); v != 0) {
    if (v < 2) throw Error(fmt::format("--vocab {} is too small", v), "prism bench train", "give at least 2, or 0 for the preset's");
    mc.vocab_size = v;
  }
  if (const std::string pos = vm["position"].as<std::string>(); pos == "rope") {
    mc.position = Positions::Rope;
    mc.rope_theta = vm["rope-theta"].as<double>();
    validate_model_config(mc, "--rope-theta");
  } else if (pos != "learned") {
    throw Error("unknown --position " + pos, "prism bench train", "use learned or rope");
  }
  return mc;
}

// --heads, or the config's schedule when it is not uniform, or by default 2 layers
// of 4x-wide heads, 2 of 2x, the rest narrow; a model of under 5 layers gets half
// 2x-wide, half narrow.
HeadSchedule bench_prism_schedule(const po::variables_map& vm, const ModelConfig& mc, const HeadSchedule* configured) {
  const int base = mc.head_dim_base(), L = mc.n_layer;
  HeadSchedule prism = vm.count("heads") ? HeadSchedule::parse(vm["heads"].as<std::string>())
                       : configured && !configured->is_uniform() ? *configured
                       : L >= 5 ? HeadSchedule::from_staircase({{base * 4, 2}, {base * 2, 2}, {base, L - 4}}, mc.d_model)
                       : L >= 2 ? HeadSchedule::from_staircase({{base * 2, L / 2}, {base, L - L / 2}}, mc.d_model)
                                : HeadSchedule::uniform(L, mc.n_head);
  require_valid_schedule(prism, mc.n_layer, mc.d_model, mc.n_head);
  return prism;
}

// `value` if it is one of `choices`, else the error naming them.
std::string choice(const po::variables_map& vm, const std::string& flag, const std::vector<std::string>& choices,
                   const std::string& fix) {
  const std::string v = vm[flag].as<std::string>();
  if (std::find(choices.begin(), choices.end(), v) == choices.end())
    throw Error(fmt::format("unknown --{} {}", flag, v), "prism bench train", fix);
  return v;
}

// --dtype: fp32 first, then bf16 (auto: bf16 only where it has a fast path here, measured).
std::vector<bool> bench_dtypes(const std::string& dt, bool bf16_emulated) {
  std::vector<bool> dtypes;
  if (dt == "fp32" || dt == "both" || dt == "auto") dtypes.push_back(false);
  if (dt == "bf16" || dt == "both" || (dt == "auto" && !bf16_emulated)) dtypes.push_back(true);
  if (dtypes.empty()) throw Error("unknown --dtype " + dt, "prism bench train", "use auto, fp32, bf16 or both");
  return dtypes;
}

// Emulated bf16 runs ~14x slower than fp32 (262 s for 6 cpu-128 steps on an AVX2 EPYC): its
// block takes the fewest steps that give its ratio, 1 warm-up and 2 timed, a small peak.
Settings emulated_bf16_settings(Settings s) {
  s.steps = std::min(s.steps, 2);
  s.warmup = std::min(s.warmup, 1);
  s.profile_steps = std::min(s.profile_steps, 1);
  return s;
}

// --batch and --seq, else (with --config) the config's micro-batch and sequence length.
void read_shape(const po::variables_map& vm, const Config* config, Settings& s) {
  s.B = vm["batch"].as<int64_t>();
  s.T = vm["seq"].as<int64_t>();
  if (config && vm["batch"].defaulted()) s.B = config->train.batch_size;
  if (config && vm["seq"].defaulted()) s.T = config->train.seq_len > 0 ? config->train.seq_len : config->model.block_size;
  if (s.T > s.mc.block_size)
    throw Error(fmt::format("--seq {} exceeds the model's block size {}", s.T, s.mc.block_size), "prism bench train", "lower --seq");
  s.steps = vm["steps"].as<int>();
  s.warmup = vm["warmup"].as<int>();
  if (s.steps < 1 || s.warmup < 0)
    throw Error("--steps must be at least 1 and --warmup at least 0", "prism bench train", "e.g. --steps 20 --warmup 3");
}

void read_references(const po::variables_map& vm, Settings& s) {
  const std::string compare = vm["no-reference"].as<bool>()
                                  ? "none"
                                  : choice(vm, "compare", {"eager", "compiled", "both", "none"}, "use eager, compiled, both or none");
  s.with_eager = compare == "eager" || compare == "both";
  s.with_compiled = compare == "compiled" || compare == "both";
  s.prism_malloc = choice(vm, "reference-malloc", {"system", "prism"}, "use system or prism") == "prism";
  s.python = vm["python"].as<std::string>();
}

// --config FILE [--set k=v ...]: composed as every command composes a config
// (compose_run_config), the vocabulary resolved from the data.
std::optional<Config> bench_config(const po::variables_map& vm) {
  if (!vm.count("config")) {
    if (vm.count("set")) throw Error("--set without --config", "prism bench train", "give the config file with --config FILE");
    return std::nullopt;
  }
  for (const char* flag : {"model", "vocab", "position", "rope-theta"})
    if (!vm[flag].defaulted())
      throw Error(fmt::format("--{} together with --config", flag), "prism bench train",
                  "change the config's model with --set (e.g. --set model=cpu-192, --set model.vocab_size=4096, "
                  "--set model.position=rope), or drop --config");
  const std::vector<std::string> sets = vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  return compose_run_config(vm["config"].as<std::string>(), sets, SweepSection::Drop);
}

Settings read_settings(const po::variables_map& vm) {
  Settings s;
  const std::optional<Config> config = bench_config(vm);
  if (config) {
    s.model_name = config->model.preset.empty() ? vm["config"].as<std::string>() : config->model.preset;
    s.mc = config->model;
    s.vocab_source = config->vocab_source;
  } else {
    s.model_name = vm["model"].as<std::string>();
    s.mc = bench_model(vm);
  }
  read_shape(vm, config ? &*config : nullptr, s);
  read_references(vm, s);
  const int threads = vm["threads"].as<int>();
  torch::set_num_threads(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
  s.uniform = HeadSchedule::uniform(s.mc.n_layer, s.mc.n_head);
  s.prism = bench_prism_schedule(vm, s.mc, config ? &config->schedule : nullptr);
  s.backend = vm["backend"].as<std::string>();
  s.cpu_clock = choice(vm, "clock", {"wall", "cpu"}, "use wall or cpu") == "cpu";
  s.dtype = vm["dtype"].as<std::string>();
  if (s.dtype != "fp32") {
    s.rates = cpu_matmul_rates();
    s.bf16_emulated = bf16_emulated(s.rates, cpu_supports_bf16());
  }
  s.dtypes = bench_dtypes(s.dtype, s.bf16_emulated);
  s.profile_steps = vm["profile-summary"].as<bool>() ? std::min(s.steps, 5) : 0;
  s.profile_top = vm["profile-top"].as<int>();
  if (vm.count("profile")) s.profile = vm["profile"].as<std::string>();
  return s;
}

// What runs where: machine, model, code paths, attention back ends, memory settings.
void print_setup(const Settings& s, double flops_per_token) {
  std::cout << "prism bench train: training steps (forward + backward + clip + AdamW), random tokens\n";
  std::cout << "machine: " << machine_description() << "\n";
  std::cout << fmt::format("model: {} ({} layers x {}, vocab {}{}, {} positions), B={} T={}, {} timed steps after {} "
                           "warm-up, attention {}\n",
                           s.model_name, s.mc.n_layer, s.mc.d_model, s.mc.vocab_size,
                           s.vocab_source.empty() ? "" : " (" + s.vocab_source + ")", positions_name(s.mc.position), s.B, s.T,
                           s.steps, s.warmup, s.backend);
  std::cout << fmt::format("CPU code paths: fused attention kernel {} ({}); LM-head softmax and MLP bias + GELU "
                           "kernels: Highway {}; residual add + LayerNorm: Highway {}; AdamW on bf16 working "
                           "copies: Highway {}; rotary positions: Highway {}; LibTorch matmuls and SDPA: CPU "
                           "capability {}\n",
                           attention::default_cpu_code_path().name, attention::default_cpu_code_path().description,
                           bias_gelu_cpu_target(), layer_norm_cpu_target(), adamw_cpu_target(), rope_cpu_target(),
                           at::get_cpu_capability());
  for (bool bf16 : s.dtypes)
    std::cout << fmt::format("attention '{}' in {}: uniform -> {}; Prism -> {}\n", s.backend, bf16 ? "bf16" : "fp32",
                             attention_path(s.backend, s.uniform, s.mc, bf16), attention_path(s.backend, s.prism, s.mc, bf16));
  if (const std::string cache = reference_inductor_cache(); !cache.empty() && s.with_compiled)
    std::cout << fmt::format("torch.compile cache: {} (its own for these ISA caps: PyTorch's cache mixes them up)\n",
                             cache);
  std::cout << fmt::format("host memory: Prism: {}; PyTorch reference: {}\n", keep_freed_host_memory().reason,
                           s.prism_malloc ? fmt::format("GLIBC_TUNABLES={}", kKeepFreedHostMemoryTunables)
                                          : "the C library's defaults (--reference-malloc prism: Prism's setting)");
  const std::string measured = fmt::format("bf16 matmuls ran {:.3g}x fp32's here ({}^3: bf16 {:.3g}, fp32 {:.3g} GFLOP/s)",
                                           s.rates.bf16_over_fp32(), s.rates.n, s.rates.bf16_gflops, s.rates.fp32_gflops);
  if (s.dtype == "auto" && s.bf16_emulated)
    std::cout << "bf16: skipped: no fast bf16 path on this CPU (" << measured
              << "; LibTorch emulates it); --dtype bf16 or both times it anyway, with the fewest steps\n";
  if (s.bf16_emulated && std::find(s.dtypes.begin(), s.dtypes.end(), true) != s.dtypes.end()) {
    const Settings e = emulated_bf16_settings(s);
    const double step_flops = flops_per_token * static_cast<double>(s.B * s.T);
    const int arms = 2 + (s.with_eager ? 1 : 0) + (s.with_compiled ? 1 : 0);
    const double eta = (e.steps + e.warmup) * arms * step_flops / std::max(s.rates.bf16_gflops * 1e9, 1.0);
    std::cout << fmt::format("bf16: no fast bf16 path on this CPU ({}; LibTorch emulates it): timed with {} steps after "
                             "{} warm-up and a 256^3 peak, the fewest that give its ratio; ETA of the bf16 block about "
                             "{} ({} runs x {} steps at the bf16 rate)\n",
                             measured, e.steps, e.warmup, format_duration(eta), arms, e.steps + e.warmup);
  }
  std::cout << fmt::format("training FLOPs per token (6N + attention, as nanoGPT counts): {:.3f} GFLOP\n\n", flops_per_token / 1e9);
  std::cout << fmt::format("{:<5} {:<36} {:>10} {:>9} {:>11} {:>11} {:>12}\n", "dtype", "run", "tokens/s", "vs eager",
                           "vs compiled", "vs uniform", "MFU");
}

// The PyTorch reference loops of one dtype, with the peak rounds between them.
struct References {
  Reference eager, compiled;
};

References time_references(const Settings& s, bool bf16, PeakMeter& peak, std::vector<std::string>& notes) {
  const char* name = bf16 ? "bf16" : "fp32";
  References r;
  if (s.with_eager)
    r.eager = time_pytorch(s, bf16, /*compiled=*/false);
  peak.round();
  if (s.with_compiled) {
    r.compiled = time_pytorch(s, bf16, /*compiled=*/true);
    notes.push_back(fmt::format("{}: torch.compile took {:.1f} s beyond {} ordinary steps ({} warm-up steps until compiled)",
                                name, r.compiled.compile_s, r.compiled.warmup_steps, r.compiled.warmup_steps));
  }
  for (const auto* ref : {&r.eager, &r.compiled})
    if (ref->m.tokens_per_s > 0 && !ref->loss_finite)
      notes.push_back(fmt::format(
          "{}: warning: the PyTorch {} loop's loss was not finite (NaN or inf): its code computed garbage on "
          "this machine's settings, so its tokens/s and the ratios against it are suspect",
          name, ref == &r.eager ? "eager" : "torch.compile"));
  return r;
}

std::string ratio_to(const Reference& r, double tokens_per_s) {
  return r.m.tokens_per_s > 0 ? fmt::format("{:.2f}x", tokens_per_s / r.m.tokens_per_s) : std::string("-");
}

// The table's rows of one dtype and the peak they are measured against.
void print_rows(const Settings& s, bool bf16, const References& refs, const PairResult& pair, const PeakMeter& peak,
                double flops_per_token) {
  const char* name = bf16 ? "bf16" : "fp32";
  auto row = [&](const std::string& run, double tps, const std::string& vs_u) {
    std::cout << fmt::format("{:<5} {:<36} {:>10.0f} {:>9} {:>11} {:>11} {:>12}\n", name, run, tps,
                             ratio_to(refs.eager, tps), ratio_to(refs.compiled, tps), vs_u,
                             mfu_text(tps, flops_per_token, peak.best()));
  };
  if (s.with_eager) row("PyTorch eager, uniform", refs.eager.m.tokens_per_s, "");
  if (s.with_compiled) row("PyTorch torch.compile, uniform", refs.compiled.m.tokens_per_s, "");
  row("Prism C++, uniform " + s.uniform.compact(), pair.uniform.tokens_per_s, "1.00x");
  row("Prism C++, " + s.prism.compact(), pair.prism.tokens_per_s, fmt::format("{:.3f}x", pair.ratio));
  if (std::isfinite(pair.ratio_ci.lo))
    std::cout << fmt::format("{:<5} {} vs uniform: median {:.3f}x, 95% interval of the median [{:.3f}, {:.3f}] "
                             "(order statistics of the {} paired steps, coverage {:.3f}; nominal: steps in one process "
                             "are not independent draws)\n",
                             name, s.prism.compact(), pair.ratio, pair.ratio_ci.lo, pair.ratio_ci.hi, s.steps,
                             pair.ratio_coverage);
  else
    std::cout << fmt::format("{:<5} {} vs uniform: median {:.3f}x, no interval: {} timed steps (a 95% interval of "
                             "the median needs 6 or more: --steps)\n",
                             name, s.prism.compact(), pair.ratio, s.steps);
  std::cout << fmt::format("{:<5} matmul peak measured here: {:.1f} GFLOP/s ({}^3 {} mm, best of {} rounds between the runs and steps)\n\n",
                           "", peak.best() / 1e9, peak.n(), name, peak.rounds());
}

// One dtype: the reference loops, then uniform and Prism taking turns, peak rounds
// between them; prints its rows and returns its profile summaries (if asked).
std::vector<std::string> bench_dtype(const Settings& given, bool bf16, double flops_per_token,
                                     std::vector<std::string>& notes) {
  const bool emulated = bf16 && given.bf16_emulated;
  const Settings s = emulated ? emulated_bf16_settings(given) : given;
  PeakMeter peak(bf16 ? torch::kBFloat16 : torch::kFloat, s.cpu_clock, emulated ? 256 : 2048);
  peak.round(emulated ? 1 : 3);
  const References refs = time_references(s, bf16, peak, notes);
  peak.round();
  const std::string trace = s.profile.empty() ? "" : s.profile + (bf16 ? ".bf16.json" : ".fp32.json");
  const auto pair = time_pair(s, bf16, trace, peak);
  peak.round();
  print_rows(s, bf16, refs, pair, peak, flops_per_token);
  if (s.profile_steps == 0) return {};
  const char* name = bf16 ? "bf16" : "fp32";
  return {pair.uniform_profile.format(fmt::format("{} Prism C++, uniform {}", name, s.uniform.compact()), s.profile_top),
          pair.prism_profile.format(fmt::format("{} Prism C++, {}", name, s.prism.compact()), s.profile_top)};
}

void print_footer(const Settings& s, const std::vector<std::string>& notes, const std::vector<std::string>& profiles) {
  for (const auto& n : notes) std::cout << n << "\n";
  std::cout << fmt::format("Prism and uniform steps take turns; vs uniform is the median over the {} timed steps of the "
                           "paired {} time ratios.\n",
                           s.steps, s.cpu_clock ? "process-CPU" : "wall-clock");
  std::cout << "MFU = tokens/s x training FLOPs per token / measured matmul peak of the same dtype; above 100% it is "
               "flagged as n/a: the peak rounds were slowed (contention), not a result.\n";
  for (const auto& p : profiles) std::cout << "\n" << p;
}

int run(const std::vector<std::string>& args) {
  return guarded("bench train", [&]() -> int {
    po::variables_map vm;
    if (!parse("bench train", kUsage, bench_options(), {}, args, vm)) return 0;
    const Settings s = read_settings(vm);
    const double flops_per_token = model_cost(s.mc, s.uniform, static_cast<int>(s.T)).train_flops_per_token;
    print_setup(s, flops_per_token);
    std::vector<std::string> profiles, notes;
    for (bool bf16 : s.dtypes)
      for (auto& p : bench_dtype(s, bf16, flops_per_token, notes)) profiles.push_back(std::move(p));
    print_footer(s, notes, profiles);
    return 0;
  });
}

const BenchRegistration reg{{"train", "training tokens/s vs PyTorch eager and torch.compile; Prism vs uniform; MFU; profile summary", run}};

}  // namespace
}  // namespace prism::cli
