// lm_softmax.h on Google Highway: compiled for every target of this
// architecture (foreach_target.h) and dispatched at run time to the best one
// the CPU supports (HWY_DYNAMIC_DISPATCH). exp is Highway's (contrib/math,
// within a few ulp of the correctly rounded value).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/lm_softmax_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "cpu/bf16_vec-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/lm_softmax.h"

HWY_BEFORE_NAMESPACE();
namespace prism::kernels::cpu::lm_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using namespace prism::kernels::cpu::bf16_vec::HWY_NAMESPACE;  // DF, VF, load_f, store_f, scalar_f, scalar_store

template <typename T>
void logsumexp_row(T* row, int64_t n, float* run_max, float* run_sum, float* chunk_max) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const float ninf = -std::numeric_limits<float>::infinity();
  VF vm = hn::Set(df, ninf);
  int64_t c = 0;
  for (; c + L <= n; c += L) vm = hn::Max(vm, load_f(row + c));
  float m = hn::GetLane(hn::MaxOfLanes(df, vm));
  for (; c < n; ++c) m = std::max(m, scalar_f(row[c]));
  const float new_max = std::max(m, *run_max);
  if (chunk_max) *chunk_max = m;
  if (std::isinf(new_max) && new_max < 0) return;  // nothing finite yet
  if (chunk_max) {
    // Exponentials against this chunk's max, stored over the logits; then folded in.
    const VF shift = hn::Set(df, m);
    VF vs = hn::Zero(df);
    c = 0;
    for (; c + L <= n; c += L) {
      const VF e = hn::Exp(df, hn::Sub(load_f(row + c), shift));
      store_f(row + c, e);
      vs = hn::Add(vs, e);
    }
    float s = hn::GetLane(hn::SumOfLanes(df, vs));
    for (; c < n; ++c) {
      const float e = std::exp(scalar_f(row[c]) - m);
      scalar_store(row + c, e);
      s += e;
    }
    *run_sum = *run_sum * std::exp(*run_max - new_max) + s * std::exp(m - new_max);
    *run_max = new_max;
    return;
  }
  const VF shift = hn::Set(df, new_max);
  VF vs = hn::Zero(df);
  c = 0;
  for (; c + L <= n; c += L) vs = hn::Add(vs, hn::Exp(df, hn::Sub(load_f(row + c), shift)));
  float s = hn::GetLane(hn::SumOfLanes(df, vs));
  for (; c < n; ++c) s += std::exp(scalar_f(row[c]) - new_max);
  *run_sum = *run_sum * std::exp(*run_max - new_max) + s;
  *run_max = new_max;
}

template <typename T>
void grad_from_exp_row(T* row, int64_t n, float factor, float scale, int64_t target) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const bool hit = target >= 0 && target < n;
  const float at_target = hit ? (scalar_f(row[target]) * factor - 1.0f) * scale : 0.0f;
  const VF vf = hn::Set(df, factor * scale);
  int64_t c = 0;
  for (; c + L <= n; c += L) store_f(row + c, hn::Mul(load_f(row + c), vf));
  for (; c < n; ++c) scalar_store(row + c, scalar_f(row[c]) * factor * scale);
  if (hit) scalar_store(row + target, at_target);
}

template <typename T>
void softmax_grad_row(T* row, int64_t n, float lse, float scale, int64_t target) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const bool hit = target >= 0 && target < n;
  const float at_target = hit ? (std::exp(scalar_f(row[target]) - lse) - 1.0f) * scale : 0.0f;
  const VF vl = hn::Set(df, lse), vs = hn::Set(df, scale);
  int64_t c = 0;
  for (; c + L <= n; c += L) store_f(row + c, hn::Mul(hn::Exp(df, hn::Sub(load_f(row + c), vl)), vs));
  for (; c < n; ++c) scalar_store(row + c, std::exp(scalar_f(row[c]) - lse) * scale);
  if (hit) scalar_store(row + target, at_target);
}

void logsumexp_rows(const LogitRows& l, float* run_max, float* run_sum, Targets t, float* target_logit,
                    float* chunk_max) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < l.rows; ++r) {
    if (const int64_t tc = t.target[r] - t.offset; tc >= 0 && tc < l.cols)
      target_logit[r] = l.type == LogitType::F32 ? static_cast<const float*>(l.data)[r * l.ld + tc]
                                                 : scalar_f(static_cast<const uint16_t*>(l.data)[r * l.ld + tc]);
    float* cm = chunk_max ? chunk_max + r : nullptr;
    if (l.type == LogitType::F32)
      logsumexp_row(static_cast<float*>(l.data) + r * l.ld, l.cols, run_max + r, run_sum + r, cm);
    else
      logsumexp_row(static_cast<uint16_t*>(l.data) + r * l.ld, l.cols, run_max + r, run_sum + r, cm);
  }
}

void softmax_grad_rows(const LogitRows& l, const float* lse, const float* scale, Targets t) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t tc = t.target[r] - t.offset;
    if (l.type == LogitType::F32)
      softmax_grad_row(static_cast<float*>(l.data) + r * l.ld, l.cols, lse[r], scale[r], tc);
    else
      softmax_grad_row(static_cast<uint16_t*>(l.data) + r * l.ld, l.cols, lse[r], scale[r], tc);
  }
}

void softmax_grad_rows_from_exp(const LogitRows& e, const float* chunk_max, const float* lse, const float* scale,
                                Targets t) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < e.rows; ++r) {
    const int64_t tc = t.target[r] - t.offset;
    const float factor = std::exp(chunk_max[r] - lse[r]);
    if (e.type == LogitType::F32)
      grad_from_exp_row(static_cast<float*>(e.data) + r * e.ld, e.cols, factor, scale[r], tc);
    else
      grad_from_exp_row(static_cast<uint16_t*>(e.data) + r * e.ld, e.cols, factor, scale[r], tc);
  }
}

const char* target_name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace prism::kernels::cpu::lm_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "cpu/simd_targets.h"
#include "hwy/targets.h"

namespace prism::kernels::cpu {
namespace lm_simd {
HWY_EXPORT(logsumexp_rows);
HWY_EXPORT(softmax_grad_rows);
HWY_EXPORT(softmax_grad_rows_from_exp);
HWY_EXPORT(target_name);
}  // namespace lm_simd

void logsumexp_rows(const LogitRows& l, float* run_max, float* run_sum, Targets t, float* target_logit,
                    float* chunk_max) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(lm_simd::logsumexp_rows)(l, run_max, run_sum, t, target_logit, chunk_max);
}
void softmax_grad_rows_from_exp(const LogitRows& e, const float* chunk_max, const float* lse, const float* scale,
                                Targets t) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(lm_simd::softmax_grad_rows_from_exp)(e, chunk_max, lse, scale, t);
}
void softmax_grad_rows(const LogitRows& l, const float* lse, const float* scale, Targets t) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(lm_simd::softmax_grad_rows)(l, lse, scale, t);
}
const char* lm_softmax_target() {
  apply_cpu_isa_to_dispatch();
  return HWY_DYNAMIC_DISPATCH(lm_simd::target_name)();
}

std::vector<std::string> lm_softmax_targets() { return runnable_target_names(HWY_TARGETS); }
void lm_softmax_force_target(const std::string& name) { force_dispatch_target(HWY_TARGETS, name); }

}  // namespace prism::kernels::cpu
#endif  // HWY_ONCE
