// adamw.h on Google Highway: compiled for every target of this architecture
// (foreach_target.h) and dispatched at run time to the best one the CPU supports.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/adamw_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "cpu/bf16_vec-inl.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/adamw.h"
#include "cpu/adamw_scalar.h"

HWY_BEFORE_NAMESPACE();
namespace prism::kernels::cpu::adamw_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using namespace prism::kernels::cpu::bf16_vec::HWY_NAMESPACE;  // DF, VF, load_f, store_f, scalar_f, scalar_store

// Elements per OpenMP work item: whole cache lines, enough work per item.
constexpr int64_t kChunk = 1 << 14;

using adamw_scalar::Consts;

// Elements [i0, i1): whole vectors, then the tail one at a time; G is the
// gradient's element type; `add` (fp32, from element i0 on) is added to the
// gradient when given.
template <typename G>
void span(const AdamWTensor& t, const G* grad, const float* add, const Consts& k, int64_t i0, int64_t i1) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const VF decay = hn::Set(df, k.decay), omb1 = hn::Set(df, k.one_minus_b1), b2 = hn::Set(df, k.b2);
  const VF omb2 = hn::Set(df, k.one_minus_b2), step_size = hn::Set(df, k.step_size);
  const VF bc2_sqrt = hn::Set(df, k.bc2_sqrt), eps = hn::Set(df, k.eps), scale = hn::Set(df, k.scale);
  int64_t i = i0;
  for (; i + L <= i1; i += L) {
    VF g = load_f(grad + i);
    if (add) g = hn::Add(g, hn::LoadU(df, add + (i - i0)));
    if (k.scaled) g = hn::Div(g, scale);
    VF p = hn::LoadU(df, t.param + i);
    p = hn::Sub(p, hn::Mul(decay, p));
    VF m = hn::LoadU(df, t.exp_avg + i);
    m = hn::Add(m, hn::Mul(omb1, hn::Sub(g, m)));
    const VF v = hn::Add(hn::Mul(b2, hn::LoadU(df, t.exp_avg_sq + i)), hn::Mul(hn::Mul(omb2, g), g));
    p = hn::Sub(p, hn::Div(hn::Mul(step_size, m), hn::Add(hn::Div(hn::Sqrt(v), bc2_sqrt), eps)));
    hn::StoreU(p, df, t.param + i);
    hn::StoreU(m, df, t.exp_avg + i);
    hn::StoreU(v, df, t.exp_avg_sq + i);
    if (t.copy_bf16) store_f(t.copy_bf16 + i, p);
  }
  for (; i < i1; ++i) {
    const float g = scalar_f(grad[i]) + (add ? add[i - i0] : 0.0f);
    adamw_scalar::update(g, t.param[i], t.exp_avg[i], t.exp_avg_sq[i], k);
    if (t.copy_bf16) scalar_store(t.copy_bf16 + i, t.param[i]);
  }
}

template <typename G>
void step_all(const AdamWTensor& t, const G* grad, const Consts& k) {
  if (t.extra.rows) {
    // By rows, each with its extra row or none.
    const int64_t cols = t.extra.cols, rows = t.n / cols;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) span(t, grad, t.extra.rows[r], k, r * cols, (r + 1) * cols);
    return;
  }
  const int64_t chunks = (t.n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c)
    span(t, grad, static_cast<const float*>(nullptr), k, c * kChunk, std::min(t.n, (c + 1) * kChunk));
}

void adamw_step(const AdamWTensor& t, const AdamWHyper& h) {
  const Consts k = adamw_scalar::consts_of(h);
  if (t.grad_bf16) step_all(t, t.grad_bf16, k);
  else step_all(t, t.grad_f32, k);
}

// The squares of x[i0, i1) (plus add[i - i0] where given): fp32 lanes over
// blocks of at most 256 values, each block's sum added in double.
double squares(const uint16_t* x, const float* add, int64_t i0, int64_t i1) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  double s = 0.0;
  int64_t i = i0;
  while (i + L <= i1) {
    const int64_t block_end = std::min(i1, i + 256);
    VF acc = hn::Zero(df);
    for (; i + L <= block_end; i += L) {
      VF v = load_f(x + i);
      if (add) v = hn::Add(v, hn::LoadU(df, add + (i - i0)));
      acc = hn::MulAdd(v, v, acc);
    }
    s += static_cast<double>(hn::GetLane(hn::SumOfLanes(df, acc)));
  }
  for (; i < i1; ++i) {
    const double v = scalar_f(x[i]) + (add ? add[i - i0] : 0.0f);
    s += v * v;
  }
  return s;
}

double sum_squares_bf16(const uint16_t* x, int64_t n, const ExtraRows& extra) {
  // Parts: rows when there are extra rows, else fixed chunks; their sums added in order.
  const int64_t part = extra.rows ? extra.cols : kChunk;
  const int64_t parts = (n + part - 1) / part;
  std::vector<double> partial(static_cast<size_t>(parts), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < parts; ++c)
    partial[static_cast<size_t>(c)] =
        squares(x, extra.rows ? extra.rows[c] : nullptr, c * part, std::min(n, (c + 1) * part));
  double s = 0.0;
  for (double p : partial) s += p;
  return s;
}

const char* target_name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace prism::kernels::cpu::adamw_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "cpu/simd_targets.h"
#include "hwy/targets.h"

namespace prism::kernels::cpu {
namespace adamw_simd {
HWY_EXPORT(adamw_step);
HWY_EXPORT(sum_squares_bf16);
HWY_EXPORT(target_name);
}  // namespace adamw_simd

void adamw_step(const AdamWTensor& t, const AdamWHyper& h) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(adamw_simd::adamw_step)(t, h);
}
double sum_squares_bf16(const uint16_t* x, int64_t n, const ExtraRows& extra) {
  apply_cpu_isa_to_dispatch();
  return HWY_DYNAMIC_DISPATCH(adamw_simd::sum_squares_bf16)(x, n, extra);
}
const char* adamw_target() {
  apply_cpu_isa_to_dispatch();
  return HWY_DYNAMIC_DISPATCH(adamw_simd::target_name)();
}
std::vector<std::string> adamw_targets() { return runnable_target_names(HWY_TARGETS); }
void adamw_force_target(const std::string& name) { force_dispatch_target(HWY_TARGETS, name); }

}  // namespace prism::kernels::cpu
#endif  // HWY_ONCE
