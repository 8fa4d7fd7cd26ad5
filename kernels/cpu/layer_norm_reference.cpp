// The scalar reference of layer_norm.h: plain C++ in double precision (the sum
// x + r is rounded to fp32 first, as the residual stream holds it).
#include <cmath>
#include <vector>

#include "cpu/layer_norm.h"

namespace prism::kernels::cpu::reference {

void add_layer_norm_forward(const Rows& x, const Rows* r, const Rows* h, const float* gamma, const float* beta,
                            float eps, const Rows& y, float* mean, float* rstd) {
  const int64_t n = x.cols;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < x.rows; ++i) {
    double sum = 0.0;
    for (int64_t c = 0; c < n; ++c) {
      const float s = static_cast<float>(load(x, i, c) + (r ? load(*r, i, c) : 0.0));
      if (h) store(*h, i, c, s);
      v[static_cast<size_t>(c)] = s;
      sum += s;
    }
    const double mu = sum / static_cast<double>(n);
    double sq = 0.0;
    for (int64_t c = 0; c < n; ++c) sq += (v[static_cast<size_t>(c)] - mu) * (v[static_cast<size_t>(c)] - mu);
    const double rs = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
    mean[i] = static_cast<float>(mu);
    rstd[i] = static_cast<float>(rs);
    for (int64_t c = 0; c < n; ++c)
      store(y, i, c, (v[static_cast<size_t>(c)] - mu) * rs * gamma[c] + (beta ? beta[c] : 0.0));
  }
}

void add_layer_norm_backward(const Rows& dy, const Rows* dh, const Rows& h, const float* mean, const float* rstd,
                             const float* gamma, const Rows& dx, const Rows* dr, float* dgamma, float* dbeta) {
  const int64_t n = h.cols;
  std::vector<double> sg(static_cast<size_t>(n), 0.0), sb(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < h.rows; ++i) {
    double s1 = 0.0, s2 = 0.0;
    for (int64_t c = 0; c < n; ++c) {
      const double xhat = (load(h, i, c) - mean[i]) * static_cast<double>(rstd[i]);
      const double g = load(dy, i, c) * gamma[c];
      s1 += g;
      s2 += g * xhat;
      sg[static_cast<size_t>(c)] += load(dy, i, c) * xhat;
      sb[static_cast<size_t>(c)] += load(dy, i, c);
    }
    const double c1 = s1 / static_cast<double>(n), c2 = s2 / static_cast<double>(n);
    for (int64_t c = 0; c < n; ++c) {
      const double xhat = (load(h, i, c) - mean[i]) * static_cast<double>(rstd[i]);
      const double g = load(dy, i, c) * gamma[c];
      const double d = rstd[i] * (g - c1 - xhat * c2) + (dh ? load(*dh, i, c) : 0.0);
      store(dx, i, c, d);
      if (dr) store(*dr, i, c, d);
    }
  }
  for (int64_t c = 0; c < n; ++c) {
    if (dgamma) dgamma[c] = static_cast<float>(sg[static_cast<size_t>(c)]);
    if (dbeta) dbeta[c] = static_cast<float>(sb[static_cast<size_t>(c)]);
  }
}

}  // namespace prism::kernels::cpu::reference
