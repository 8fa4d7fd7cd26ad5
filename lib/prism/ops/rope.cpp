#include "prism/ops/rope.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cpu/rope.h"
#include "prism/error.h"
#include "prism/ops/cpu_isa.h"

namespace prism {

namespace {

namespace kc = prism::kernels::cpu;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const char* kWhere = "rotary position embedding";

kc::RopeView view_of(const torch::Tensor& t) {
  return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

// y[i] = rotate(x[i]) for the defined pairs, by the kernel; x and y (B, T, H, D) of one dtype.
void rotate(const std::vector<torch::Tensor>& x, const std::vector<torch::Tensor>& y, const torch::Tensor& cos,
            const torch::Tensor& sin, bool inverse) {
  kc::RopeParams p;
  p.type = x[0].scalar_type() == torch::kFloat ? kc::RowType::F32 : kc::RowType::BF16;
  p.B = x[0].size(0);
  p.T = x[0].size(1);
  p.H = x[0].size(2);
  p.D = x[0].size(3);
  p.cos = cos.data_ptr<float>();
  p.sin = sin.data_ptr<float>();
  p.inverse = inverse;
  for (size_t i = 0; i < x.size(); ++i) {
    p.x[p.tensors] = view_of(x[i]);
    p.y[p.tensors] = view_of(y[i]);
    ++p.tensors;
  }
  kc::rope_apply(p);
}

torch::Tensor unit_d_stride(const torch::Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); }

// q and k rotated together (one pass over both); the backward turns their
// gradients back with the same angles, so only the table is saved.
struct RotaryPositions : public torch::autograd::Function<RotaryPositions> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& cos, const torch::Tensor& sin) {
    RECORD_FUNCTION("prism::rope", std::vector<c10::IValue>());
    const auto qs = unit_d_stride(q), ks = unit_d_stride(k);
    auto qr = torch::empty(q.sizes(), q.options()), kr = torch::empty(k.sizes(), k.options());
    rotate({qs, ks}, {qr, kr}, cos, sin, /*inverse=*/false);
    ctx->save_for_backward({cos, sin});
    return {qr, kr};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    RECORD_FUNCTION("prism::rope_backward", std::vector<c10::IValue>());
    const auto saved = ctx->get_saved_variables();
    std::vector<torch::Tensor> in, out;
    torch::Tensor dq, dk;
    for (int i = 0; i < 2; ++i) {
      if (!grads[i].defined()) continue;
      auto g = unit_d_stride(grads[i]);
      auto d = torch::empty(g.sizes(), g.options());
      in.push_back(g);
      out.push_back(d);
      (i == 0 ? dq : dk) = d;
    }
    if (!in.empty()) rotate(in, out, saved[0], saved[1], /*inverse=*/true);
    return {dq, dk, torch::Tensor(), torch::Tensor()};
  }
};

void check_fit(const torch::Tensor& q, const torch::Tensor& k, const RopeTable& table) {
  if (q.dim() != 4 || q.sizes() != k.sizes() || q.scalar_type() != k.scalar_type() || q.device() != k.device())
    throw Error(fmt::format("q {} and k {} must be two (B, T, H, D) tensors of one dtype and device", q.sizes(), k.sizes()),
                kWhere, "pass the q and k views of one qkv projection");
  if (q.size(3) != table.head_dim() || q.size(1) > table.positions())
    throw Error(fmt::format("q and k of {} positions and head width {}, a table of {} positions for width {}", q.size(1),
                            q.size(3), table.positions(), table.head_dim()),
                kWhere, "make the table with rope_table(T, head width, theta) for this layer");
}

}  // namespace

RopeTable rope_table(int64_t T, int64_t head_dim, double theta, const torch::Device& device) {
  if (head_dim < 2 || head_dim % 2 != 0 || T < 0 || !(theta > 0.0))
    throw Error(fmt::format("a rotary table for head width {}, {} positions and theta {}", head_dim, T, theta), kWhere,
                "use an even head width, T >= 0 and theta > 0");
  const auto f64 = torch::dtype(torch::kDouble);
  // w_c = theta^(-2c/D), the angles t w_c in double: at t = 8191 an fp32 product
  // would be off by ~1e-3 rad.
  auto inv_freq = torch::pow(theta, -torch::arange(0, head_dim, 2, f64) / static_cast<double>(head_dim));
  auto angles = torch::outer(torch::arange(T, f64), inv_freq);
  RopeTable t;
  t.cos = angles.cos().to(device, torch::kFloat).contiguous();
  t.sin = angles.sin().to(device, torch::kFloat).contiguous();
  return t;
}

torch::Tensor rope_by_ops(const torch::Tensor& x, const RopeTable& table) {
  const int64_t T = x.size(1), half = x.size(3) / 2;
  // (T, 1, D): the same angle for c and c + D/2, broadcast over batch and heads; in x's dtype as Hugging Face does.
  auto cos = torch::cat({table.cos, table.cos}, 1).narrow(0, 0, T).unsqueeze(1).to(x.device(), x.scalar_type());
  auto sin = torch::cat({table.sin, table.sin}, 1).narrow(0, 0, T).unsqueeze(1).to(x.device(), x.scalar_type());
  auto rotated_half = torch::cat({-x.narrow(3, half, half), x.narrow(3, 0, half)}, 3);
  return x * cos + rotated_half * sin;
}

bool fused_rope_fits(const torch::Tensor& q, const torch::Tensor& k) {
  const auto t = q.scalar_type();
  return q.device().is_cpu() && k.device().is_cpu() && (t == torch::kFloat || t == torch::kBFloat16) &&
         k.scalar_type() == t;
}

RotatedQK apply_rope(const torch::Tensor& q, const torch::Tensor& k, const RopeTable& table) {
  check_fit(q, k, table);
  if (!fused_rope_fits(q, k)) return {rope_by_ops(q, table), rope_by_ops(k, table)};
  check_cpu_isa_env();
  const int64_t T = q.size(1);
  // The table's first T rows: contiguous, as the kernel reads them.
  auto res = RotaryPositions::apply(q, k, table.cos.narrow(0, 0, T), table.sin.narrow(0, 0, T));
  return {res[0], res[1]};
}

const char* rope_cpu_target() {
  check_cpu_isa_env();
  return kc::rope_target();
}

}  // namespace prism
