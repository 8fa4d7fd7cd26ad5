// The scalar reference of the fused CPU kernel: the textbook algorithm, one
// query row at a time with an explicit row of probabilities, in double
// precision. Slow and obviously right; the tests hold every SIMD code path
// to it. Same contract as the fast paths (attention_cpu.h), no workspace.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/attention_targets.h"
#include "cpu/bf16.h"

namespace prism::kernels::cpu::reference {

namespace {

double load(const void* base, DType dtype, int64_t i) {
  if (dtype == DType::F32) return static_cast<const float*>(base)[i];
  return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
}

// Rounds to fp32, then (bf16 outputs) to the nearest even bf16.
void store(void* base, DType dtype, int64_t i, double value) {
  const float f = static_cast<float>(value);
  if (dtype == DType::F32) {
    static_cast<float*>(base)[i] = f;
    return;
  }
  static_cast<uint16_t*>(base)[i] = float_to_bf16(f);
}

int64_t at(const Strides& s, int64_t b, int64_t t, int64_t h) { return b * s.batch + t * s.seq + h * s.head; }

// Runs body(b, h) for every (b, h), one per OpenMP thread.
template <typename Body>
void for_each_head(int64_t B, int64_t H, int threads, const Body& body) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(dynamic, 1)
#endif
  for (int64_t bh = 0; bh < B * H; ++bh) body(bh / H, bh % H);
  (void)threads;
}

}  // namespace

void forward(const AttentionForwardParams& p, const Launch& launch) {
  const int64_t T = p.seq_len, D = p.head_dim;
  for_each_head(p.batch, p.heads, launch.num_threads, [&](int64_t b, int64_t h) {
    std::vector<double> s(T), o(D);
    for (int64_t i = 0; i < T; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += load(p.q, p.dtype, at(p.q_stride, b, i, h) + d) * load(p.k, p.dtype, at(p.k_stride, b, j, h) + d);
        s[j] = dot * p.scale;
        mx = std::max(mx, s[j]);
      }
      double l = 0, dist = 0;
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        const double e = std::exp(s[j] - mx);
        l += e;
        dist += e * static_cast<double>(i - j);
        for (int64_t d = 0; d < D; ++d) o[d] += e * load(p.v, p.dtype, at(p.v_stride, b, j, h) + d);
      }
      for (int64_t d = 0; d < D; ++d) store(p.o, p.dtype, at(p.o_stride, b, i, h) + d, o[d] / l);
      const int64_t row = (b * p.heads + h) * T + i;
      p.lse[row] = static_cast<float>(mx + std::log(l));
      if (p.distance) p.distance[row] = static_cast<float>(dist / l);
    }
  });
}

void backward(const AttentionBackwardParams& p, const Launch& launch) {
  const int64_t T = p.seq_len, D = p.head_dim;
  for_each_head(p.batch, p.heads, launch.num_threads, [&](int64_t b, int64_t h) {
    auto x = [&](const void* base, const Strides& s, int64_t t, int64_t d) {
      return load(base, p.dtype, at(s, b, t, h) + d);
    };
    std::vector<double> dk(T * D, 0.0), dv(T * D, 0.0), dq(D);
    for (int64_t i = 0; i < T; ++i) {
      const int64_t row = (b * p.heads + h) * T + i;
      // delta = rowsum(dout * o), with the output as stored (as FlashAttention does).
      double delta = 0;
      for (int64_t d = 0; d < D; ++d) delta += x(p.dout, p.dout_stride, i, d) * x(p.o, p.o_stride, i, d);
      if (p.delta) p.delta[row] = static_cast<float>(delta);
      std::fill(dq.begin(), dq.end(), 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        double score = 0, dp = 0;
        for (int64_t d = 0; d < D; ++d) {
          score += x(p.q, p.q_stride, i, d) * x(p.k, p.k_stride, j, d);
          dp += x(p.dout, p.dout_stride, i, d) * x(p.v, p.v_stride, j, d);
        }
        const double prob = std::exp(score * p.scale - p.lse[row]);
        const double ds = prob * (dp - delta) * p.scale;
        for (int64_t d = 0; d < D; ++d) {
          dq[d] += ds * x(p.k, p.k_stride, j, d);
          dk[j * D + d] += ds * x(p.q, p.q_stride, i, d);
          dv[j * D + d] += prob * x(p.dout, p.dout_stride, i, d);
        }
      }
      for (int64_t d = 0; d < D; ++d) store(p.dq, p.dtype, at(p.dq_stride, b, i, h) + d, dq[d]);
    }
    for (int64_t j = 0; j < T; ++j)
      for (int64_t d = 0; d < D; ++d) {
        store(p.dk, p.dtype, at(p.dk_stride, b, j, h) + d, dk[j * D + d]);
        store(p.dv, p.dtype, at(p.dv_stride, b, j, h) + d, dv[j * D + d]);
      }
  });
}

}  // namespace prism::kernels::cpu::reference
