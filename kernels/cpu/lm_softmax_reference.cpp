// The scalar reference of lm_softmax.h: plain C++ in double precision.
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/lm_softmax.h"

namespace prism::kernels::cpu::reference {

void logsumexp_rows(const LogitRows& l, float* run_max, float* run_sum, Targets t, float* target_logit,
                    float* chunk_max) {
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t tc = t.target[r] - t.offset;
    if (tc >= 0 && tc < l.cols) target_logit[r] = static_cast<float>(load(l, r, tc));
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < l.cols; ++c) m = std::max(m, load(l, r, c));
    const double new_max = std::max<double>(m, run_max[r]);
    double s = std::isinf(new_max) ? 0.0 : run_sum[r] * std::exp(run_max[r] - new_max);
    for (int64_t c = 0; c < l.cols; ++c) s += std::exp(load(l, r, c) - new_max);
    run_max[r] = static_cast<float>(new_max);
    run_sum[r] = static_cast<float>(s);
    if (!chunk_max) continue;
    chunk_max[r] = static_cast<float>(m);
    for (int64_t c = 0; c < l.cols; ++c) store(l, r, c, std::exp(load(l, r, c) - m));
  }
}

void softmax_grad_rows_from_exp(const LogitRows& e, const float* chunk_max, const float* lse, const float* scale,
                                Targets t) {
  for (int64_t r = 0; r < e.rows; ++r) {
    const double factor = std::exp(static_cast<double>(chunk_max[r]) - lse[r]);
    for (int64_t c = 0; c < e.cols; ++c)
      store(e, r, c, (load(e, r, c) * factor - (c == t.target[r] - t.offset ? 1.0 : 0.0)) * scale[r]);
  }
}

void softmax_grad_rows(const LogitRows& l, const float* lse, const float* scale, Targets t) {
  for (int64_t r = 0; r < l.rows; ++r)
    for (int64_t c = 0; c < l.cols; ++c)
      store(l, r, c, (std::exp(load(l, r, c) - lse[r]) - (c == t.target[r] - t.offset ? 1.0 : 0.0)) * scale[r]);
}

}  // namespace prism::kernels::cpu::reference
