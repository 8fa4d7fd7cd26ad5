#include "prism/ops/attention_fused.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "cpu/attention_cpu.h"
#include "prism/machine_cache.h"
#include "prism/ops/cpu_code_paths.h"
#include "prism/ops/kernel_params.h"
#include "prism/error.h"

namespace prism::attention {

namespace {

namespace kc = kernels::cpu;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const char* kWhere = "attention back end 'fused'";
const char* kFix = "use attention.backend: auto, sdpa or reference";

// The kernel reads any (B, T, H) strides but needs unit stride along D.
torch::Tensor unit_d_stride(const torch::Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); }
torch::Tensor workspace(std::size_t bytes) {
  // LibTorch's CPU allocator aligns to 64 bytes, as the kernel expects.
  return torch::empty({static_cast<int64_t>(bytes)}, torch::dtype(torch::kUInt8));
}
double softmax_scale(const torch::Tensor& q) { return 1.0 / std::sqrt(static_cast<double>(q.size(3))); }

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               bool want_distance, int64_t isa, int64_t threads) {
    q = unit_d_stride(q);
    k = unit_d_stride(k);
    v = unit_d_stride(v);
    const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
    auto out = torch::empty({B, T, H, D}, q.options());
    auto lse = torch::empty({B, H, T}, q.options().dtype(torch::kFloat));
    torch::Tensor distance = want_distance ? torch::empty({B, H, T}, q.options().dtype(torch::kFloat)) : torch::Tensor();
    const auto p = forward_params(q, k, v, out, lse, distance, softmax_scale(q), kWhere);
    kc::Launch launch{static_cast<int>(threads), static_cast<kc::Isa>(isa), nullptr};
    auto ws = workspace(kc::forward_workspace_bytes(p, launch.num_threads, launch.isa));
    launch.workspace = ws.data_ptr();
    run_kernel(kWhere, kFix, [&] { kc::attention_forward(p, launch); });

    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["isa"] = isa;
    ctx->saved_data["threads"] = threads;
    if (!want_distance) return {out};
    ctx->mark_non_differentiable({distance});
    return {out, distance};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    torch::Tensor dout = grads[0].defined() ? unit_d_stride(grads[0].to(q.scalar_type())) : torch::zeros_like(out);
    auto dq = torch::empty_like(q, at::MemoryFormat::Contiguous);
    auto dk = torch::empty_like(q, at::MemoryFormat::Contiguous);
    auto dv = torch::empty_like(q, at::MemoryFormat::Contiguous);
    const auto p = backward_params(q, k, v, out, dout, dq, dk, dv, lse, {}, {}, softmax_scale(q), kWhere);
    kc::Launch launch{static_cast<int>(ctx->saved_data["threads"].toInt()),
                      static_cast<kc::Isa>(ctx->saved_data["isa"].toInt()), nullptr};
    auto ws = workspace(kc::backward_workspace_bytes(p, launch.num_threads, launch.isa));
    launch.workspace = ws.data_ptr();
    run_kernel(kWhere, kFix, [&] { kc::attention_backward(p, launch); });
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Seconds of the best of `rounds` forward + backward passes of a (1, 512, 4, 64) bf16
// problem on each of `isas`, taking turns (as one loaded core slows both alike).
std::vector<double> time_bf16_paths(const std::vector<kc::Isa>& isas, int rounds) {
  torch::NoGradGuard outer;
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(1234);
  auto qkv = torch::randn({1, 512, 3, 4, 64}, gen, torch::dtype(torch::kFloat)).to(torch::kBFloat16);
  auto dout = torch::randn({1, 512, 4, 64}, gen, torch::dtype(torch::kFloat)).to(torch::kBFloat16);
  const int64_t threads = torch::get_num_threads();
  std::vector<double> best(isas.size(), 1e30);
  for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms up
    for (size_t i = 0; i < isas.size(); ++i) {
      torch::AutoGradMode grad(true);
      auto leaf = qkv.clone().requires_grad_(true);
      auto q = leaf.select(2, 0), k = leaf.select(2, 1), v = leaf.select(2, 2);
      const auto t0 = std::chrono::steady_clock::now();
      auto out = FusedAttentionFunction::apply(q, k, v, false, static_cast<int64_t>(isas[i]), threads)[0];
      out.backward(dout);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best[i] = std::min(best[i], s);
    }
  }
  return best;
}

struct Bf16Choice {
  CpuCodePath path;
  std::string reason;
};

// The decision, cached per machine (machine_cache.h) so that every process here, a
// resumed run included, takes the same path: the paths differ in rounding.
const Bf16Choice& bf16_choice() {
  static const Bf16Choice choice = [] {
    Bf16Choice c{default_cpu_code_path(), ""};
    const char* env = std::getenv("PRISM_CPU_ISA");
    if (c.path.name != kc::isa_name(kc::Isa::Avx512Bf16) || (env && *env)) return c;
    std::vector<kc::Isa> candidates;
    for (kc::Isa isa : {kc::Isa::Amx, kc::Isa::Avx512Bf16, kc::Isa::Avx512})
      if (kc::isa_supported(isa)) candidates.push_back(isa);
    std::vector<std::string> names;
    for (kc::Isa isa : candidates) names.push_back(kc::isa_name(isa));
    const std::string file = machine_cache_file("cpu-attention.json");
    const std::string key =
        fmt::format("{} | {} threads | fused attention, bf16 inputs: seconds per code path ({})", cpu_model_name(),
                    torch::get_num_threads(), fmt::join(names, ", "));
    const auto cache = read_machine_cache(file);
    const auto entry = cache.find(key);
    std::vector<double> seconds;
    if (entry != cache.end() && entry->is_object() && entry->contains("seconds") && entry->at("seconds").is_object()) {
      for (const auto& name : names) {
        const auto& s = entry->at("seconds");
        const double t = s.contains(name) && s.at(name).is_number() ? s.at(name).get<double>() : 0.0;
        if (!(t > 0)) break;
        seconds.push_back(t);
      }
    }
    std::string how;
    if (seconds.size() == names.size()) {
      how = "measured before, cached in " + file;
    } else {
      seconds = time_bf16_paths(candidates, 3);
      nlohmann::json per_path;
      for (size_t i = 0; i < names.size(); ++i) per_path[names[i]] = seconds[i];
      try {
        write_machine_cache_entry(file, key, {{"seconds", per_path}});
        how = "measured now, cached in " + file;
      } catch (const std::exception& e) {
        how = std::string("measured now; not cached: ") + e.what();
      }
    }
    const size_t best = static_cast<size_t>(std::min_element(seconds.begin(), seconds.end()) - seconds.begin());
    c.path = cpu_code_path(names[best], kWhere);
    std::vector<std::string> times;
    for (size_t i = 0; i < names.size(); ++i) times.push_back(fmt::format("{} {:.2f} ms", names[i], 1e3 * seconds[i]));
    c.reason = fmt::format("bf16 inputs: code path {} (a 512-token forward + backward took {} here) [{}]", c.path.name,
                           fmt::join(times, ", "), how);
    return c;
  }();
  return choice;
}

}  // namespace

CpuCodePath fused_code_path(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? bf16_choice().path : default_cpu_code_path();
}

std::string bf16_code_path_reason() { return bf16_choice().reason; }

std::string fused_unsupported_reason(const torch::Tensor& q, double dropout_p) {
  if (!q.device().is_cpu()) return fmt::format("it runs on the CPU and the inputs are on {}", q.device().str());
  if (q.scalar_type() != torch::kFloat && q.scalar_type() != torch::kBFloat16)
    return fmt::format("it takes float32 or bfloat16 inputs, not {}", c10::toString(q.scalar_type()));
  if (dropout_p > 0.0) return fmt::format("it has no dropout on attention probabilities (dropout {})", dropout_p);
  return {};
}

Output fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const FusedOptions& opt) {
  check_qkv(q, k, v, kWhere);
  if (auto why = fused_unsupported_reason(q, 0.0); !why.empty())
    throw Error("the fused attention kernel cannot run: " + why, kWhere, kFix);
  const CpuCodePath path = opt.code_path.empty() ? fused_code_path(q.scalar_type()) : cpu_code_path(opt.code_path, kWhere);
  const auto isa = kc::isa_by_name(path.name);
  const int threads = opt.num_threads > 0 ? opt.num_threads : torch::get_num_threads();
  auto res = FusedAttentionFunction::apply(q, k, v, opt.want_distance, static_cast<int64_t>(isa),
                                           static_cast<int64_t>(threads));
  Output o;
  o.out = res[0];
  if (opt.want_distance) o.distance = res[1];
  return o;
}

}  // namespace prism::attention
