// layer_norm.h on Google Highway: compiled for every target of this architecture
// (foreach_target.h) and dispatched at run time to the best one the CPU supports
// (HWY_DYNAMIC_DISPATCH).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/layer_norm_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "cpu/bf16_vec-inl.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/layer_norm.h"

HWY_BEFORE_NAMESPACE();
namespace prism::kernels::cpu::layer_norm_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using namespace prism::kernels::cpu::bf16_vec::HWY_NAMESPACE;  // DF, VF, load_f, store_f, scalar_f, scalar_store

// Rows per block of the gamma and beta gradients' partial sums: the blocks, not
// the threads, fix the order of the sums.
constexpr int64_t kRowBlock = 32;

HWY_INLINE float sum_of_lanes(DF df, VF v) { return hn::GetLane(hn::SumOfLanes(df, v)); }

// One row forward; h is x (no residual) or receives x + r first.
template <typename TR, typename TY>
void forward_row(const float* x, const TR* r, float* h, const float* gamma, const float* beta, float eps, TY* y,
                 int64_t n, float* mean_out, float* rstd_out) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  VF acc = hn::Zero(df);
  float tail = 0.0f;
  int64_t c = 0;
  if (r) {
    for (; c + L <= n; c += L) {
      const VF v = hn::Add(load_f(x + c), load_f(r + c));
      store_f(h + c, v);
      acc = hn::Add(acc, v);
    }
    for (; c < n; ++c) tail += (h[c] = x[c] + scalar_f(r[c]));
    x = h;
  } else {
    for (; c + L <= n; c += L) acc = hn::Add(acc, load_f(x + c));
    for (; c < n; ++c) tail += x[c];
  }
  const float mean = (sum_of_lanes(df, acc) + tail) / static_cast<float>(n);
  const VF vmean = hn::Set(df, mean);
  acc = hn::Zero(df);
  tail = 0.0f;
  for (c = 0; c + L <= n; c += L) {
    const VF d = hn::Sub(load_f(x + c), vmean);
    acc = hn::MulAdd(d, d, acc);
  }
  for (; c < n; ++c) tail += (x[c] - mean) * (x[c] - mean);
  const float rstd = 1.0f / std::sqrt((sum_of_lanes(df, acc) + tail) / static_cast<float>(n) + eps);
  const VF vrstd = hn::Set(df, rstd);
  for (c = 0; c + L <= n; c += L) {
    const VF xhat = hn::Mul(hn::Sub(load_f(x + c), vmean), vrstd);
    const VF b = beta ? hn::LoadU(df, beta + c) : hn::Zero(df);
    store_f(y + c, hn::MulAdd(xhat, hn::LoadU(df, gamma + c), b));
  }
  for (; c < n; ++c) scalar_store(y + c, (x[c] - mean) * rstd * gamma[c] + (beta ? beta[c] : 0.0f));
  *mean_out = mean;
  *rstd_out = rstd;
}

// One row backward; the row's gamma and beta gradients are added into accg and
// accb (fp32, one per column) when given.
template <typename TDY, typename TDR>
void backward_row(const TDY* dy, const float* dh, const float* h, float mean, float rstd, const float* gamma,
                  float* dx, TDR* dr, float* accg, float* accb, int64_t n) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const VF vmean = hn::Set(df, mean), vrstd = hn::Set(df, rstd);
  VF s1 = hn::Zero(df), s2 = hn::Zero(df);
  float t1 = 0.0f, t2 = 0.0f;
  int64_t c = 0;
  for (; c + L <= n; c += L) {
    const VF xhat = hn::Mul(hn::Sub(hn::LoadU(df, h + c), vmean), vrstd);
    const VF d = load_f(dy + c);
    const VF g = hn::Mul(d, hn::LoadU(df, gamma + c));
    s1 = hn::Add(s1, g);
    s2 = hn::MulAdd(g, xhat, s2);
    if (accg) hn::StoreU(hn::MulAdd(d, xhat, hn::LoadU(df, accg + c)), df, accg + c);
    if (accb) hn::StoreU(hn::Add(hn::LoadU(df, accb + c), d), df, accb + c);
  }
  for (; c < n; ++c) {
    const float xhat = (h[c] - mean) * rstd;
    const float d = scalar_f(dy[c]);
    t1 += d * gamma[c];
    t2 += d * gamma[c] * xhat;
    if (accg) accg[c] += d * xhat;
    if (accb) accb[c] += d;
  }
  const float c1 = (sum_of_lanes(df, s1) + t1) / static_cast<float>(n);
  const float c2 = (sum_of_lanes(df, s2) + t2) / static_cast<float>(n);
  const VF vc1 = hn::Set(df, c1), vc2 = hn::Set(df, c2);
  for (c = 0; c + L <= n; c += L) {
    const VF xhat = hn::Mul(hn::Sub(hn::LoadU(df, h + c), vmean), vrstd);
    const VF g = hn::Mul(load_f(dy + c), hn::LoadU(df, gamma + c));
    VF v = hn::Mul(vrstd, hn::Sub(hn::Sub(g, vc1), hn::Mul(xhat, vc2)));
    if (dh) v = hn::Add(v, hn::LoadU(df, dh + c));
    hn::StoreU(v, df, dx + c);
    if (dr) store_f(dr + c, v);
  }
  for (; c < n; ++c) {
    const float xhat = (h[c] - mean) * rstd;
    const float g = scalar_f(dy[c]) * gamma[c];
    float v = rstd * ((g - c1) - xhat * c2);
    if (dh) v += dh[c];
    dx[c] = v;
    if (dr) scalar_store(dr + c, v);
  }
}

template <typename T>
const T* row_ptr(const Rows* m, int64_t i) {
  return m ? static_cast<const T*>(m->data) + i * m->ld : nullptr;
}
template <typename T>
T* row_ptr_mut(const Rows* m, int64_t i) {
  return m ? static_cast<T*>(m->data) + i * m->ld : nullptr;
}

template <typename TR, typename TY>
void forward_rows(const Rows& x, const Rows* r, const Rows* h, const float* gamma, const float* beta, float eps,
                  const Rows& y, float* mean, float* rstd) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < x.rows; ++i)
    forward_row(row_ptr<float>(&x, i), row_ptr<TR>(r, i), row_ptr_mut<float>(h, i), gamma, beta, eps,
                row_ptr_mut<TY>(&y, i), x.cols, mean + i, rstd + i);
}

template <typename TDY, typename TDR>
void backward_rows(const Rows& dy, const Rows* dh, const Rows& h, const float* mean, const float* rstd,
                   const float* gamma, const Rows& dx, const Rows* dr, float* dgamma, float* dbeta) {
  const int64_t n = h.cols;
  // Each block of kRowBlock rows sums into its own partial rows; the partials are
  // then summed in block order, column by column.
  const int64_t blocks = (h.rows + kRowBlock - 1) / kRowBlock;
  std::vector<float> pg(dgamma ? static_cast<size_t>(blocks * n) : 0, 0.0f);
  std::vector<float> pb(dbeta ? static_cast<size_t>(blocks * n) : 0, 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    float* accg = dgamma ? pg.data() + b * n : nullptr;
    float* accb = dbeta ? pb.data() + b * n : nullptr;
    for (int64_t i = b * kRowBlock; i < std::min(h.rows, (b + 1) * kRowBlock); ++i)
      backward_row(row_ptr<TDY>(&dy, i), row_ptr<float>(dh, i), row_ptr<float>(&h, i), mean[i], rstd[i], gamma,
                   row_ptr_mut<float>(&dx, i), row_ptr_mut<TDR>(dr, i), accg, accb, n);
  }
  if (!dgamma && !dbeta) return;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < n; ++c) {
    float sg = 0.0f, sb = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      if (dgamma) sg += pg[static_cast<size_t>(b * n + c)];
      if (dbeta) sb += pb[static_cast<size_t>(b * n + c)];
    }
    if (dgamma) dgamma[c] = sg;
    if (dbeta) dbeta[c] = sb;
  }
}

void add_layer_norm_forward(const Rows& x, const Rows* r, const Rows* h, const float* gamma, const float* beta,
                            float eps, const Rows& y, float* mean, float* rstd) {
  const bool r16 = r && r->type == RowType::BF16, y16 = y.type == RowType::BF16;
  if (r16) {
    if (y16) forward_rows<uint16_t, uint16_t>(x, r, h, gamma, beta, eps, y, mean, rstd);
    else forward_rows<uint16_t, float>(x, r, h, gamma, beta, eps, y, mean, rstd);
  } else {
    if (y16) forward_rows<float, uint16_t>(x, r, h, gamma, beta, eps, y, mean, rstd);
    else forward_rows<float, float>(x, r, h, gamma, beta, eps, y, mean, rstd);
  }
}

void add_layer_norm_backward(const Rows& dy, const Rows* dh, const Rows& h, const float* mean, const float* rstd,
                             const float* gamma, const Rows& dx, const Rows* dr, float* dgamma, float* dbeta) {
  const bool dy16 = dy.type == RowType::BF16, dr16 = dr && dr->type == RowType::BF16;
  if (dy16) {
    if (dr16) backward_rows<uint16_t, uint16_t>(dy, dh, h, mean, rstd, gamma, dx, dr, dgamma, dbeta);
    else backward_rows<uint16_t, float>(dy, dh, h, mean, rstd, gamma, dx, dr, dgamma, dbeta);
  } else {
    if (dr16) backward_rows<float, uint16_t>(dy, dh, h, mean, rstd, gamma, dx, dr, dgamma, dbeta);
    else backward_rows<float, float>(dy, dh, h, mean, rstd, gamma, dx, dr, dgamma, dbeta);
  }
}

const char* target_name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace prism::kernels::cpu::layer_norm_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "cpu/simd_targets.h"
#include "hwy/targets.h"

namespace prism::kernels::cpu {
namespace layer_norm_simd {
HWY_EXPORT(add_layer_norm_forward);
HWY_EXPORT(add_layer_norm_backward);
HWY_EXPORT(target_name);
}  // namespace layer_norm_simd

void add_layer_norm_forward(const Rows& x, const Rows* r, const Rows* h, const float* gamma, const float* beta,
                            float eps, const Rows& y, float* mean, float* rstd) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(layer_norm_simd::add_layer_norm_forward)(x, r, h, gamma, beta, eps, y, mean, rstd);
}
void add_layer_norm_backward(const Rows& dy, const Rows* dh, const Rows& h, const float* mean, const float* rstd,
                             const float* gamma, const Rows& dx, const Rows* dr, float* dgamma, float* dbeta) {
  apply_cpu_isa_to_dispatch();
  HWY_DYNAMIC_DISPATCH(layer_norm_simd::add_layer_norm_backward)(dy, dh, h, mean, rstd, gamma, dx, dr, dgamma, dbeta);
}
const char* layer_norm_target() {
  apply_cpu_isa_to_dispatch();
  return HWY_DYNAMIC_DISPATCH(layer_norm_simd::target_name)();
}

std::vector<std::string> layer_norm_targets() { return runnable_target_names(HWY_TARGETS); }
void layer_norm_force_target(const std::string& name) { force_dispatch_target(HWY_TARGETS, name); }

}  // namespace prism::kernels::cpu
#endif  // HWY_ONCE
