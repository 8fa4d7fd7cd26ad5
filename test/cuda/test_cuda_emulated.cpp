// The CUDA attention kernels' own source, run on the CPU under emulation
// (kernels/cuda/emulation.h: fibers per thread, warp collectives completed
// together, random warp interleavings, cp.async landing early or late) against
// float64 attention math. This checks the kernels' indexing, masking, online
// softmax, fragment plumbing and barriers wherever the tests run, GPU or not;
// test_cuda_attention.cpp checks the compiled kernels on a real GPU.
#include <catch2/catch.hpp>

#ifdef PRISM_HAVE_CUDA_HEADERS
#define PRISM_CUDA_EMULATION 1
#include "cuda/backward_mma.cuh"
#include "cuda/forward_mma.cuh"
#include "cuda/preprocess.cuh"
#include "cuda/simt_fp32.cuh"

#include <cmath>
#include <random>
#include <vector>
#endif

#ifdef PRISM_HAVE_CUDA_HEADERS
namespace {

namespace K = prism::kernels;
namespace KC = prism::kernels::cuda;

template <typename T> float to_float(T x);
template <> float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> float to_float(__half x) { return __half2float(x); }
template <> float to_float(float x) { return x; }
template <typename T> T from_float(float x);
template <> __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
template <> __half from_float(float x) { return __float2half_rn(x); }
template <> float from_float(float x) { return x; }

template <typename T> K::DType dtype_of();
template <> K::DType dtype_of<__nv_bfloat16>() { return K::DType::BF16; }
template <> K::DType dtype_of<__half>() { return K::DType::F16; }
template <> K::DType dtype_of<float>() { return K::DType::F32; }

// A (B, T, H, D) view into a buffer, with element strides.
struct View {
  int64_t offset;
  K::Strides s;
  int64_t at(int64_t b, int64_t t, int64_t h, int64_t d) const { return offset + b * s.batch + t * s.seq + h * s.head + d; }
};

// Float64 attention of one problem, forward and backward.
struct Expected {
  std::vector<double> o, lse, dist, dq, dk, dv;  // (B, T, H, D) dense / (B, H, T)
};

struct Problem {
  int64_t B, T, H, D;
  float scale;
  // q, k, v: views of one fused (B, T, 3, H, D) buffer, as the model's qkv projection.
  View q, k, v, dense;
  int64_t fused_size, dense_size, rows_size;
  Problem(int64_t B_, int64_t T_, int64_t H_, int64_t D_) : B(B_), T(T_), H(H_), D(D_) {
    scale = 1.0f / std::sqrt(static_cast<float>(D));
    const K::Strides fused{T * 3 * H * D, 3 * H * D, D};
    q = {0, fused};
    k = {H * D, fused};
    v = {2 * H * D, fused};
    dense = {0, K::Strides{T * H * D, H * D, D}};
    fused_size = B * T * 3 * H * D;
    dense_size = B * T * H * D;
    rows_size = B * H * T;
  }
  int64_t row(int64_t b, int64_t h, int64_t t) const { return (b * H + h) * T + t; }
};

template <typename T>
Expected expected(const Problem& pb, const std::vector<T>& qkv, const std::vector<T>& dout) {
  Expected e;
  e.o.assign(pb.dense_size, 0);
  e.dq.assign(pb.dense_size, 0);
  e.dk.assign(pb.dense_size, 0);
  e.dv.assign(pb.dense_size, 0);
  e.lse.assign(pb.rows_size, 0);
  e.dist.assign(pb.rows_size, 0);
  const int64_t Tn = pb.T, D = pb.D;
  auto x = [&](const View& vw, int64_t b, int64_t t, int64_t h, int64_t d) {
    return static_cast<double>(to_float(qkv[vw.at(b, t, h, d)]));
  };
  for (int64_t b = 0; b < pb.B; ++b)
    for (int64_t h = 0; h < pb.H; ++h) {
      std::vector<double> P(Tn * Tn, 0.0), dS(Tn * Tn, 0.0);
      for (int64_t i = 0; i < Tn; ++i) {
        double mx = -INFINITY;
        std::vector<double> s(i + 1);
        for (int64_t j = 0; j <= i; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += x(pb.q, b, i, h, d) * x(pb.k, b, j, h, d);
          s[j] = acc * pb.scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
        e.lse[pb.row(b, h, i)] = mx + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) {
          P[i * Tn + j] = std::exp(s[j] - mx) / sum;
          e.dist[pb.row(b, h, i)] += P[i * Tn + j] * static_cast<double>(i - j);
        }
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += P[i * Tn + j] * x(pb.v, b, j, h, d);
          e.o[pb.dense.at(b, i, h, d)] = acc;
        }
      }
      auto g = [&](int64_t t, int64_t d) { return static_cast<double>(to_float(dout[pb.dense.at(b, t, h, d)])); };
      for (int64_t i = 0; i < Tn; ++i) {
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += g(i, d) * e.o[pb.dense.at(b, i, h, d)];
        for (int64_t j = 0; j <= i; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) dp += g(i, d) * x(pb.v, b, j, h, d);
          dS[i * Tn + j] = P[i * Tn + j] * (dp - delta);
        }
      }
      for (int64_t i = 0; i < Tn; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double dq = 0, dk = 0, dv = 0;
          for (int64_t j = 0; j < Tn; ++j) {
            dq += dS[i * Tn + j] * x(pb.k, b, j, h, d);          // row i of dQ
            dk += dS[j * Tn + i] * x(pb.q, b, j, h, d);          // row i of dK (query j >= i)
            dv += P[j * Tn + i] * g(j, d);                       // row i of dV
          }
          e.dq[pb.dense.at(b, i, h, d)] = pb.scale * dq;
          e.dk[pb.dense.at(b, i, h, d)] = pb.scale * dk;
          e.dv[pb.dense.at(b, i, h, d)] = dv;
        }
    }
  return e;
}

template <typename V>
double rel_err(const std::vector<V>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(to_float(got[i]));
    if (!std::isfinite(g)) return INFINITY;  // an element never written stays poisoned (NaN)
    num += (g - want[i]) * (g - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

void run_emulated(const KC::LaunchShape& s, const std::function<void()>& kernel, bool copies_at_issue, unsigned seed) {
  KC::emu::run(s.grid, s.block, s.smem, kernel, copies_at_issue, seed);
}

// Runs forward and backward of the kernels for dtype T and head dim D under
// emulation; checks o, lse, distance, dq, dk, dv against float64.
template <typename T, int D>
void check_emulated(int64_t B, int64_t Tlen, int64_t H, bool copies_at_issue, unsigned seed) {
  INFO("D=" << D << " T=" << Tlen << " B=" << B << " H=" << H << " copies " << (copies_at_issue ? "at issue" : "at wait")
            << " seed " << seed);
  const Problem pb(B, Tlen, H, D);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<T> qkv(pb.fused_size), dout(pb.dense_size);
  for (auto& x : qkv) x = from_float<T>(normal(rng));
  for (auto& x : dout) x = from_float<T>(normal(rng));
  const float nan = std::nanf("");
  std::vector<T> o(pb.dense_size, from_float<T>(nan)), dq(pb.dense_size, from_float<T>(nan)),
      dk(pb.dense_size, from_float<T>(nan)), dv(pb.dense_size, from_float<T>(nan));
  std::vector<float> lse(pb.rows_size, nan), dist(pb.rows_size, nan), delta(pb.rows_size, nan),
      dq_accum(pb.dense_size, 0.f);

  K::AttentionForwardParams f;
  f.q = qkv.data() + pb.q.offset;
  f.k = qkv.data() + pb.k.offset;
  f.v = qkv.data() + pb.v.offset;
  f.o = o.data();
  f.q_stride = pb.q.s;
  f.k_stride = pb.k.s;
  f.v_stride = pb.v.s;
  f.o_stride = pb.dense.s;
  f.lse = lse.data();
  f.distance = dist.data();
  f.batch = B;
  f.seq_len = Tlen;
  f.heads = H;
  f.head_dim = D;
  f.scale = pb.scale;
  f.dtype = dtype_of<T>();

  K::AttentionBackwardParams g;
  g.q = f.q;
  g.k = f.k;
  g.v = f.v;
  g.o = o.data();
  g.dout = dout.data();
  g.dq = dq.data();
  g.dk = dk.data();
  g.dv = dv.data();
  g.q_stride = pb.q.s;
  g.k_stride = pb.k.s;
  g.v_stride = pb.v.s;
  g.o_stride = g.dout_stride = g.dq_stride = g.dk_stride = g.dv_stride = pb.dense.s;
  g.lse = lse.data();
  g.delta = delta.data();
  g.dq_accum = dq_accum.data();
  g.batch = B;
  g.seq_len = Tlen;
  g.heads = H;
  g.head_dim = D;
  g.scale = pb.scale;
  g.dtype = f.dtype;

  if constexpr (std::is_same<T, float>::value) {
    run_emulated(KC::forward_simt_shape<D>(f), [&] { KC::forward_simt_kernel<D, true>(f); }, copies_at_issue, seed);
    run_emulated(KC::delta_shape(g), [&] { KC::delta_kernel<T>(g); }, copies_at_issue, seed);
    run_emulated(KC::backward_dq_simt_shape<D>(g), [&] { KC::backward_dq_simt_kernel<D>(g); }, copies_at_issue, seed);
    run_emulated(KC::backward_dkdv_simt_shape<D>(g), [&] { KC::backward_dkdv_simt_kernel<D>(g); }, copies_at_issue,
                 seed);
  } else {
    run_emulated(KC::forward_mma_shape<T, D>(f), [&] { KC::forward_mma_kernel<T, D, true>(f); }, copies_at_issue,
                 seed);
    run_emulated(KC::delta_shape(g), [&] { KC::delta_kernel<T>(g); }, copies_at_issue, seed);
    run_emulated(KC::backward_mma_shape<T, D>(g), [&] { KC::backward_mma_kernel<T, D>(g); }, copies_at_issue, seed);
    run_emulated(KC::convert_dq_shape(g), [&] { KC::convert_dq_kernel<T>(g); }, copies_at_issue, seed);
  }

  const Expected e = expected(pb, qkv, dout);
  const double tol = std::is_same<T, float>::value ? 1e-5 : 2e-2;
  CHECK(rel_err(o, e.o) < tol);
  CHECK(rel_err(lse, e.lse) < 1e-5);
  CHECK(rel_err(dist, e.dist) < 1e-4);
  CHECK(rel_err(dq, e.dq) < tol);
  CHECK(rel_err(dk, e.dk) < tol);
  CHECK(rel_err(dv, e.dv) < tol);
}

// A sharply local head at long context: q_i = k_i = a (cos w_f i, sin w_f i)_f
// with rotary-style frequencies, so the probability mass of query i sits
// within a few tokens of it. Runs the forward kernel for dtype T under
// emulation and returns the largest distance error in tokens against float64
// math on the same (rounded) inputs; `old_error` gets what i - sum_j p_ij j / l
// in fp32 (sequential sum, each term rounded once) would have made of the same
// probabilities over the last 512 rows.
template <typename T, int D>
double local_head_distance_error(int64_t Tlen, double* old_error) {
  const Problem pb(1, Tlen, 1, D);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<T> qkv(pb.fused_size);
  const double a = 2.75;
  for (int64_t t = 0; t < Tlen; ++t)
    for (int64_t f = 0; f < D / 2; ++f) {
      const double w = std::pow(10000.0, -static_cast<double>(f) / (D / 2));
      const T c = from_float<T>(static_cast<float>(a * std::cos(w * t))), s = from_float<T>(static_cast<float>(a * std::sin(w * t)));
      qkv[pb.q.at(0, t, 0, f)] = qkv[pb.k.at(0, t, 0, f)] = c;
      qkv[pb.q.at(0, t, 0, f + D / 2)] = qkv[pb.k.at(0, t, 0, f + D / 2)] = s;
    }
  for (int64_t t = 0; t < Tlen; ++t)
    for (int64_t d = 0; d < D; ++d) qkv[pb.v.at(0, t, 0, d)] = from_float<T>(normal(rng));
  std::vector<T> o(pb.dense_size);
  std::vector<float> lse(pb.rows_size), dist(pb.rows_size, std::nanf(""));
  K::AttentionForwardParams f;
  f.q = qkv.data() + pb.q.offset;
  f.k = qkv.data() + pb.k.offset;
  f.v = qkv.data() + pb.v.offset;
  f.o = o.data();
  f.q_stride = pb.q.s;
  f.k_stride = pb.k.s;
  f.v_stride = pb.v.s;
  f.o_stride = pb.dense.s;
  f.lse = lse.data();
  f.distance = dist.data();
  f.batch = 1;
  f.seq_len = Tlen;
  f.heads = 1;
  f.head_dim = D;
  f.scale = pb.scale;
  f.dtype = dtype_of<T>();
  if constexpr (std::is_same<T, float>::value)
    run_emulated(KC::forward_simt_shape<D>(f), [&] { KC::forward_simt_kernel<D, true>(f); }, false, 1);
  else
    run_emulated(KC::forward_mma_shape<T, D>(f), [&] { KC::forward_mma_kernel<T, D, true>(f); }, false, 1);

  double worst = 0, worst_old = 0;
  std::vector<double> s(Tlen);
  auto x = [&](const View& vw, int64_t t, int64_t d) { return static_cast<double>(to_float(qkv[vw.at(0, t, 0, d)])); };
  for (int64_t i = 0; i < Tlen; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += x(pb.q, i, d) * x(pb.k, j, d);
      s[j] = acc * pb.scale;
      mx = std::max(mx, s[j]);
    }
    double l = 0, dsum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      const double e = std::exp(s[j] - mx);
      l += e;
      dsum += e * static_cast<double>(i - j);
    }
    const double truth = dsum / l;
    worst = std::max(worst, std::abs(static_cast<double>(dist[i]) - truth));  // NaN (never written) fails below
    if (!std::isfinite(dist[i])) worst = INFINITY;
    if (i >= Tlen - 512) {
      float sum_pj = 0.f;
      for (int64_t j = 0; j <= i; ++j) sum_pj += static_cast<float>(std::exp(s[j] - mx) / l) * static_cast<float>(j);
      worst_old = std::max(worst_old, std::abs(static_cast<double>(static_cast<float>(i) - sum_pj) - truth));
    }
  }
  *old_error = worst_old;
  return worst;
}

}  // namespace
#endif  // PRISM_HAVE_CUDA_HEADERS

#ifndef PRISM_HAVE_CUDA_HEADERS
#define PRISM_SKIP_WITHOUT_CUDA_HEADERS()                                                                         \
  WARN("SKIPPED: no CUDA device headers (cuda_bf16.h) on this machine to compile the kernels for emulation");   \
  return
#else
#define PRISM_SKIP_WITHOUT_CUDA_HEADERS() (void)0
#endif

TEST_CASE("emulated CUDA kernels, bf16 tensor-core path, every head dim", "[cuda][emulated]") {
  PRISM_SKIP_WITHOUT_CUDA_HEADERS();
#ifdef PRISM_HAVE_CUDA_HEADERS
  // T 1 and 7: one partial tile; 70 and 130: several query and key blocks, ragged ends.
  for (int64_t T : {1, 7, 70}) {
    check_emulated<__nv_bfloat16, 32>(1, T, 2, T % 2 == 0, 10 + T);
    check_emulated<__nv_bfloat16, 64>(2, T, 1, T % 2 == 1, 20 + T);
    check_emulated<__nv_bfloat16, 96>(1, T, 1, T % 2 == 0, 30 + T);
    check_emulated<__nv_bfloat16, 128>(1, T, 1, T % 2 == 1, 40 + T);
    check_emulated<__nv_bfloat16, 192>(1, T, 1, T % 2 == 0, 50 + T);
    check_emulated<__nv_bfloat16, 256>(1, T, 1, T % 2 == 1, 60 + T);
  }
  check_emulated<__nv_bfloat16, 64>(1, 130, 1, true, 7);
  check_emulated<__nv_bfloat16, 64>(1, 130, 1, false, 8);
#endif
}

TEST_CASE("emulated CUDA kernels, fp16 tensor-core path", "[cuda][emulated]") {
  PRISM_SKIP_WITHOUT_CUDA_HEADERS();
#ifdef PRISM_HAVE_CUDA_HEADERS
  check_emulated<__half, 64>(1, 70, 2, false, 3);
  check_emulated<__half, 256>(1, 40, 1, true, 4);
#endif
}

TEST_CASE("emulated CUDA kernels, fp32 CUDA-core path", "[cuda][emulated]") {
  PRISM_SKIP_WITHOUT_CUDA_HEADERS();
#ifdef PRISM_HAVE_CUDA_HEADERS
  for (int64_t T : {1, 7, 40}) {
    check_emulated<float, 32>(1, T, 2, T % 2 == 0, 70 + T);
    check_emulated<float, 64>(2, T, 1, T % 2 == 1, 80 + T);
    check_emulated<float, 256>(1, T, 1, T % 2 == 0, 90 + T);
  }
#endif
}

TEST_CASE("emulated CUDA kernels keep distance precise for a sharply local head at T 4096", "[cuda][emulated]") {
  PRISM_SKIP_WITHOUT_CUDA_HEADERS();
#ifdef PRISM_HAVE_CUDA_HEADERS
  // sum_j p_ij (i - j) accumulated as it is keeps fp32's relative precision on
  // a distance of ~1 token; i - sum_j p_ij j / l keeps only its absolute
  // precision near i ~ 4000. The bound separates the two.
  const double bound = 1e-4;  // tokens
  double old = 0;
  const double simt = local_head_distance_error<float, 32>(4096, &old);
  INFO("fp32 CUDA-core path: worst distance error " << simt << " tokens; old formula " << old);
  CHECK(simt <= bound);
  CHECK(old > bound);  // the bound would catch the old formula
  const double mma = local_head_distance_error<__nv_bfloat16, 32>(4096, &old);
  INFO("bf16 tensor-core path: worst distance error " << mma << " tokens; old formula " << old);
  CHECK(mma <= bound);
#endif
}
