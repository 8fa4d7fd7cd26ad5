// The CUDA attention kernels' own source, run on the CPU under emulation
// (kernels/cuda/emulation.h: fibers per thread, warp collectives completed
// together, random warp interleavings, cp.async landing early or late) against
// float64 attention math. This checks the kernels' indexing, masking, online
// softmax, fragment plumbing and barriers wherever the tests run, GPU or not;
// test_cuda_attention.cpp checks the compiled kernels on a real GPU.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "cuda/limits.h"

#ifdef PRISM_HAVE_CUDA_HEADERS
#define PRISM_CUDA_EMULATION 1
#include "cuda/backward_mma.cuh"
#include "cuda/forward_mma.cuh"
#include "cuda/preprocess.cuh"
#include "cuda/simt_fp32.cuh"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
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

// Float64 attention of one (b, h) of a problem, forward and backward, without
// a T x T buffer (P is recomputed from the log-sum-exp, as the kernels do), so
// long sequences fit. o, dq, dk, dv are (T, D) and lse, dist (T) of that head.
// Only keys in [key_begin, key_end) contribute to dq and get dk, dv: what the
// backward's CTAs over those key blocks compute (dq then holds their part).
struct HeadExpected {
  std::vector<double> o, lse, dist, dq, dk, dv;
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
HeadExpected expected_head(const Problem& pb, const std::vector<T>& qkv, const std::vector<T>& dout, int64_t b,
                           int64_t h, int64_t key_begin = 0, int64_t key_end = -1) {
  const int64_t Tn = pb.T, D = pb.D;
  if (key_end < 0) key_end = Tn;
  HeadExpected e;
  for (auto* v : {&e.o, &e.dq, &e.dk, &e.dv}) v->assign(Tn * D, 0);
  e.lse.assign(Tn, 0);
  e.dist.assign(Tn, 0);
  auto x = [&](const View& vw, int64_t t, int64_t d) { return static_cast<double>(to_float(qkv[vw.at(b, t, h, d)])); };
  auto g = [&](int64_t t, int64_t d) { return static_cast<double>(to_float(dout[pb.dense.at(b, t, h, d)])); };
  std::vector<double> s(Tn);
  auto scores = [&](int64_t i, int64_t j_begin, int64_t j_end) {
    for (int64_t j = j_begin; j < j_end; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += x(pb.q, i, d) * x(pb.k, j, d);
      s[j] = acc * pb.scale;
    }
  };
  for (int64_t i = 0; i < Tn; ++i) {  // forward
    scores(i, 0, i + 1);
    const double mx = *std::max_element(s.begin(), s.begin() + i + 1);
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
    e.lse[i] = mx + std::log(sum);
    for (int64_t j = 0; j <= i; ++j) {
      const double p = std::exp(s[j] - e.lse[i]);
      e.dist[i] += p * static_cast<double>(i - j);
      for (int64_t d = 0; d < D; ++d) e.o[i * D + d] += p * x(pb.v, j, d);
    }
  }
  for (int64_t i = key_begin; i < Tn; ++i) {  // backward: query i against keys [key_begin, min(i + 1, key_end))
    const int64_t j_end = std::min(i + 1, key_end);
    double delta = 0;
    for (int64_t d = 0; d < D; ++d) delta += g(i, d) * e.o[i * D + d];
    scores(i, key_begin, j_end);
    for (int64_t j = key_begin; j < j_end; ++j) {
      const double p = std::exp(s[j] - e.lse[i]);
      double dp = 0;
      for (int64_t d = 0; d < D; ++d) dp += g(i, d) * x(pb.v, j, d);
      const double ds = p * (dp - delta);
      for (int64_t d = 0; d < D; ++d) {
        e.dq[i * D + d] += pb.scale * ds * x(pb.k, j, d);
        e.dk[j * D + d] += pb.scale * ds * x(pb.q, i, d);
        e.dv[j * D + d] += p * g(i, d);
      }
    }
  }
  return e;
}

// The whole problem's float64 attention, in the kernels' layouts: o, dq, dk, dv
// dense (B, T, H, D), lse and dist (B, H, T).
struct Expected {
  std::vector<double> o, lse, dist, dq, dk, dv;
};

template <typename T>
Expected expected(const Problem& pb, const std::vector<T>& qkv, const std::vector<T>& dout) {
  Expected e;
  for (auto* v : {&e.o, &e.dq, &e.dk, &e.dv}) v->assign(pb.dense_size, 0);
  e.lse.assign(pb.rows_size, 0);
  e.dist.assign(pb.rows_size, 0);
  for (int64_t b = 0; b < pb.B; ++b)
    for (int64_t h = 0; h < pb.H; ++h) {
      const HeadExpected he = expected_head(pb, qkv, dout, b, h);
      for (int64_t t = 0; t < pb.T; ++t) {
        e.lse[pb.row(b, h, t)] = he.lse[t];
        e.dist[pb.row(b, h, t)] = he.dist[t];
        for (int64_t d = 0; d < pb.D; ++d) {
          const int64_t at = pb.dense.at(b, t, h, d);
          e.o[at] = he.o[t * pb.D + d];
          e.dq[at] = he.dq[t * pb.D + d];
          e.dk[at] = he.dk[t * pb.D + d];
          e.dv[at] = he.dv[t * pb.D + d];
        }
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

void run_emulated(const KC::LaunchShape& s, const std::function<void()>& kernel, bool copies_at_issue, unsigned seed,
                  const KC::emu::BlockFilter& only = nullptr) {
  KC::emu::run(s.grid, s.block, s.smem, kernel, copies_at_issue, seed, only);
}

// Every buffer of one problem, outputs poisoned (NaN: an element never written
// fails the checks), and the kernels' params pointing into them.
template <typename T>
struct Buffers {
  Problem pb;
  std::vector<T> qkv, dout, o, dq, dk, dv;
  std::vector<float> lse, dist, delta, dq_accum;
  explicit Buffers(const Problem& problem) : pb(problem) {
    const T nan = from_float<T>(std::nanf(""));
    qkv.assign(pb.fused_size, from_float<T>(0.f));
    dout.assign(pb.dense_size, from_float<T>(0.f));
    for (auto* v : {&o, &dq, &dk, &dv}) v->assign(pb.dense_size, nan);
    for (auto* v : {&lse, &dist, &delta}) v->assign(pb.rows_size, std::nanf(""));
    dq_accum.assign(pb.dense_size, 0.f);
  }
  // Fills q, k, v and dout of head (b, h) with standard normal values.
  void randomize_head(int64_t b, int64_t h, std::mt19937& rng) {
    std::normal_distribution<float> normal;
    for (int64_t t = 0; t < pb.T; ++t)
      for (int64_t d = 0; d < pb.D; ++d) {
        for (const View* vw : {&pb.q, &pb.k, &pb.v}) qkv[vw->at(b, t, h, d)] = from_float<T>(normal(rng));
        dout[pb.dense.at(b, t, h, d)] = from_float<T>(normal(rng));
      }
  }
  K::AttentionForwardParams forward() {
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
    f.batch = pb.B;
    f.seq_len = pb.T;
    f.heads = pb.H;
    f.head_dim = pb.D;
    f.scale = pb.scale;
    f.dtype = dtype_of<T>();
    return f;
  }
  K::AttentionBackwardParams backward() {
    K::AttentionBackwardParams g;
    g.q = qkv.data() + pb.q.offset;
    g.k = qkv.data() + pb.k.offset;
    g.v = qkv.data() + pb.v.offset;
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
    g.batch = pb.B;
    g.seq_len = pb.T;
    g.heads = pb.H;
    g.head_dim = pb.D;
    g.scale = pb.scale;
    g.dtype = dtype_of<T>();
    return g;
  }
  // Head (b, h) of a dense (B, T, H, D) buffer as (T, D), rows [t0, t1).
  template <typename V>
  std::vector<V> head(const std::vector<V>& buf, int64_t b, int64_t h, int64_t t0 = 0, int64_t t1 = -1) const {
    if (t1 < 0) t1 = pb.T;
    std::vector<V> out;
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t d = 0; d < pb.D; ++d) out.push_back(buf[pb.dense.at(b, t, h, d)]);
    return out;
  }
  // Rows [t0, t1) of head (b, h) of a (B, H, T) buffer.
  std::vector<float> rows(const std::vector<float>& buf, int64_t b, int64_t h, int64_t t0 = 0, int64_t t1 = -1) const {
    if (t1 < 0) t1 = pb.T;
    return std::vector<float>(buf.begin() + pb.row(b, h, t0), buf.begin() + pb.row(b, h, t0) + (t1 - t0));
  }
};

// Rows [t0, t1) (of width `width`) of a per-head reference array.
std::vector<double> slice(const std::vector<double>& v, int64_t t0, int64_t t1, int64_t width) {
  return std::vector<double>(v.begin() + t0 * width, v.begin() + t1 * width);
}

// Runs forward and backward of the kernels for dtype T and head dim D under
// emulation; checks o, lse, distance, dq, dk, dv against float64.
template <typename T, int D>
void check_emulated(int64_t B, int64_t Tlen, int64_t H, bool copies_at_issue, unsigned seed) {
  INFO("D=" << D << " T=" << Tlen << " B=" << B << " H=" << H << " copies " << (copies_at_issue ? "at issue" : "at wait")
            << " seed " << seed);
  Buffers<T> buf(Problem(B, Tlen, H, D));
  std::mt19937 rng(seed);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) buf.randomize_head(b, h, rng);
  const K::AttentionForwardParams f = buf.forward();
  const K::AttentionBackwardParams g = buf.backward();
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

  const Expected e = expected(buf.pb, buf.qkv, buf.dout);
  const double tol = std::is_same<T, float>::value ? 1e-5 : 2e-2;
  CHECK(rel_err(buf.o, e.o) < tol);
  CHECK(rel_err(buf.lse, e.lse) < 1e-5);
  CHECK(rel_err(buf.dist, e.dist) < 1e-4);
  CHECK(rel_err(buf.dq, e.dq) < tol);
  CHECK(rel_err(buf.dk, e.dk) < tol);
  CHECK(rel_err(buf.dv, e.dv) < tol);
}

// The kernels at the grid limits: a (B, T, H) problem with B or H at 65535,
// where only the heads in `heads` hold random inputs (every other input is 0,
// so a CTA that reads another head's rows gets a wrong answer) and only their
// CTAs run. Checks those heads' o, lse, distance, dk, dv and dq (the fp32
// accumulator on the tensor-core path) against float64.
template <typename T, int D>
void check_heads_at_grid_limit(int64_t B, int64_t Tlen, int64_t H, const std::vector<std::pair<int64_t, int64_t>>& heads) {
  INFO("D=" << D << " T=" << Tlen << " B=" << B << " H=" << H);
  Buffers<T> buf(Problem(B, Tlen, H, D));
  std::mt19937 rng(B + H);
  for (const auto& bh : heads) buf.randomize_head(bh.first, bh.second, rng);
  const KC::emu::BlockFilter only = [&](const dim3& blk) {
    for (const auto& bh : heads)
      if (blk.z == bh.first && blk.y == bh.second) return true;
    return false;
  };
  const K::AttentionForwardParams f = buf.forward();
  const K::AttentionBackwardParams g = buf.backward();
  if constexpr (std::is_same<T, float>::value)
    run_emulated(KC::forward_simt_shape<D>(f), [&] { KC::forward_simt_kernel<D, true>(f); }, false, 1, only);
  else
    run_emulated(KC::forward_mma_shape<T, D>(f), [&] { KC::forward_mma_kernel<T, D, true>(f); }, false, 1, only);
  for (const auto& bh : heads) {  // delta = rowsum(dO * O) of the checked heads (delta_kernel's own test is below)
    const std::vector<T> o = buf.head(buf.o, bh.first, bh.second), d = buf.head(buf.dout, bh.first, bh.second);
    for (int64_t t = 0; t < Tlen; ++t) {
      float sum = 0.f;
      for (int64_t c = 0; c < D; ++c) sum += to_float(o[t * D + c]) * to_float(d[t * D + c]);
      buf.delta[buf.pb.row(bh.first, bh.second, t)] = sum;
    }
  }
  if constexpr (std::is_same<T, float>::value) {
    run_emulated(KC::backward_dq_simt_shape<D>(g), [&] { KC::backward_dq_simt_kernel<D>(g); }, false, 2, only);
    run_emulated(KC::backward_dkdv_simt_shape<D>(g), [&] { KC::backward_dkdv_simt_kernel<D>(g); }, false, 2, only);
  } else {
    run_emulated(KC::backward_mma_shape<T, D>(g), [&] { KC::backward_mma_kernel<T, D>(g); }, false, 2, only);
  }
  const double tol = std::is_same<T, float>::value ? 1e-5 : 2e-2;
  for (const auto& bh : heads) {
    INFO("head (b " << bh.first << ", h " << bh.second << ")");
    const HeadExpected e = expected_head(buf.pb, buf.qkv, buf.dout, bh.first, bh.second);
    CHECK(rel_err(buf.head(buf.o, bh.first, bh.second), e.o) < tol);
    CHECK(rel_err(buf.rows(buf.lse, bh.first, bh.second), e.lse) < 1e-5);
    CHECK(rel_err(buf.rows(buf.dist, bh.first, bh.second), e.dist) < 1e-4);
    CHECK(rel_err(buf.head(buf.dk, bh.first, bh.second), e.dk) < tol);
    CHECK(rel_err(buf.head(buf.dv, bh.first, bh.second), e.dv) < tol);
    if constexpr (std::is_same<T, float>::value) CHECK(rel_err(buf.head(buf.dq, bh.first, bh.second), e.dq) < tol);
    else CHECK(rel_err(buf.head(buf.dq_accum, bh.first, bh.second), e.dq) < tol);
  }
}

// The kernels at a long sequence (one batch, one head): the forward's CTA of the
// last query block, which streams every key tile, and the backward's CTA of key
// block 0, which walks every query block. The backward reads lse and delta of
// every row: they come from the float64 reference. Checks that block's rows of
// o, lse and distance, its keys' dk and dv, and every row's dq (the part from
// those keys: the fp32 accumulator on the tensor-core path).
template <typename T, int D>
void check_long_sequence(int64_t Tlen) {
  INFO("D=" << D << " T=" << Tlen);
  Buffers<T> buf(Problem(1, Tlen, 1, D));
  std::mt19937 rng(static_cast<unsigned>(Tlen));
  buf.randomize_head(0, 0, rng);
  const K::AttentionForwardParams f = buf.forward();
  const K::AttentionBackwardParams g = buf.backward();
  const KC::emu::BlockFilter first = [](const dim3& blk) { return blk.x == 0; };  // query blocks launch last-first
  int64_t q_rows = 0, k_rows = 0;
  if constexpr (std::is_same<T, float>::value) {
    q_rows = k_rows = KC::SimtConfig::kRows;
    run_emulated(KC::forward_simt_shape<D>(f), [&] { KC::forward_simt_kernel<D, true>(f); }, false, 3, first);
  } else {
    q_rows = KC::ForwardConfig<D>::kBlockM;
    k_rows = KC::BackwardConfig<D>::kBlockN;
    run_emulated(KC::forward_mma_shape<T, D>(f), [&] { KC::forward_mma_kernel<T, D, true>(f); }, false, 3, first);
  }
  const int64_t q0 = (Tlen - 1) / q_rows * q_rows;  // the last query block's first row
  const HeadExpected e = expected_head(buf.pb, buf.qkv, buf.dout, 0, 0, 0, k_rows);
  const double tol = std::is_same<T, float>::value ? 1e-5 : 2e-2;
  CHECK(rel_err(buf.head(buf.o, 0, 0, q0, Tlen), slice(e.o, q0, Tlen, D)) < tol);
  CHECK(rel_err(buf.rows(buf.lse, 0, 0, q0, Tlen), slice(e.lse, q0, Tlen, 1)) < 1e-5);
  CHECK(rel_err(buf.rows(buf.dist, 0, 0, q0, Tlen), slice(e.dist, q0, Tlen, 1)) < 1e-4);
  for (int64_t t = 0; t < Tlen; ++t) {
    buf.lse[t] = static_cast<float>(e.lse[t]);
    double delta = 0;
    for (int64_t c = 0; c < D; ++c) delta += to_float(buf.dout[buf.pb.dense.at(0, t, 0, c)]) * e.o[t * D + c];
    buf.delta[t] = static_cast<float>(delta);
  }
  if constexpr (std::is_same<T, float>::value) {
    run_emulated(KC::backward_dkdv_simt_shape<D>(g), [&] { KC::backward_dkdv_simt_kernel<D>(g); }, false, 4, first);
  } else {
    run_emulated(KC::backward_mma_shape<T, D>(g), [&] { KC::backward_mma_kernel<T, D>(g); }, false, 4, first);
    CHECK(rel_err(buf.head(buf.dq_accum, 0, 0), e.dq) < tol);
  }
  CHECK(rel_err(buf.head(buf.dk, 0, 0, 0, k_rows), slice(e.dk, 0, k_rows, D)) < tol);
  CHECK(rel_err(buf.head(buf.dv, 0, 0, 0, k_rows), slice(e.dv, 0, k_rows, D)) < tol);
}

// A sharply local head at long context: q_i = k_i = a (cos w_f i, sin w_f i)_f
// with rotary-style frequencies, so the probability mass of query i sits
// within a few tokens of it. Runs the forward kernel for dtype T under
// emulation on the last 512 rows and returns their largest distance error in
// tokens against float64 math on the same (rounded) inputs; `old_error` gets
// what i - sum_j p_ij j / l in fp32 (sequential sum, each term rounded once)
// would have made of the same probabilities there.
template <typename T, int D>
double local_head_distance_error(int64_t Tlen, double* old_error) {
  Buffers<T> buf(Problem(1, Tlen, 1, D));
  const Problem& pb = buf.pb;
  std::vector<T>& qkv = buf.qkv;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
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
  const std::vector<float>& dist = buf.dist;
  const K::AttentionForwardParams f = buf.forward();
  // Only the CTAs of the last 512 rows run (query blocks launch last-first), where
  // i ~ 4000 makes the old formula's absolute precision visible.
  const int64_t checked = 512;
  int64_t rows_per_cta = KC::SimtConfig::kRows;
  if constexpr (!std::is_same<T, float>::value) rows_per_cta = KC::ForwardConfig<D>::kBlockM;
  const KC::emu::BlockFilter last_rows = [&](const dim3& blk) { return blk.x * rows_per_cta < checked; };
  if constexpr (std::is_same<T, float>::value)
    run_emulated(KC::forward_simt_shape<D>(f), [&] { KC::forward_simt_kernel<D, true>(f); }, false, 1, last_rows);
  else
    run_emulated(KC::forward_mma_shape<T, D>(f), [&] { KC::forward_mma_kernel<T, D, true>(f); }, false, 1,
                 last_rows);

  double worst = 0, worst_old = 0;
  std::vector<double> s(Tlen);
  auto x = [&](const View& vw, int64_t t, int64_t d) { return static_cast<double>(to_float(qkv[vw.at(0, t, 0, d)])); };
  for (int64_t i = Tlen - checked; i < Tlen; ++i) {
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
    {
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

TEST_CASE("emulated CUDA kernels at the grid limits: 65535 heads, batch 65535", "[cuda][emulated][limits]") {
  PRISM_SKIP_WITHOUT_CUDA_HEADERS();
#ifdef PRISM_HAVE_CUDA_HEADERS
  // The real grids (y = heads, z = batch at their limit), with the first and the
  // last head or batch entry run: 64-bit offsets past 2^31 elements are not
  // reached at these sizes, but a grid index read from the wrong axis, or a
  // head or batch stride applied to the wrong one, is.
  check_heads_at_grid_limit<__nv_bfloat16, 32>(1, 16, KC::kMaxHeads, {{0, 0}, {0, KC::kMaxHeads - 1}});
  check_heads_at_grid_limit<float, 32>(KC::kMaxBatch, 8, 1, {{0, 0}, {KC::kMaxBatch - 1, 0}});
#endif
}

TEST_CASE("emulated delta and dq conversion stride past the 65535-block grid cap", "[cuda][emulated][limits]") {
  PRISM_SKIP_WITHOUT_CUDA_HEADERS();
#ifdef PRISM_HAVE_CUDA_HEADERS
  // 65535 heads x 32 rows: delta's 2.1M rows and dq's 33.6M element pairs need
  // four and two passes of the capped grid. Only the grid's last block runs; it
  // must write exactly the rows (pairs) its stride gives it, each correctly.
  using T = __nv_bfloat16;
  const int64_t B = 1, Tlen = 32, H = KC::kMaxHeads, D = 32;
  const K::Strides dense{Tlen * H * D, H * D, D};
  std::vector<T> o(B * Tlen * H * D), dout(o.size()), dq(o.size(), from_float<T>(std::nanf("")));
  std::vector<float> delta(B * H * Tlen, std::nanf("")), dq_accum(o.size());
  for (size_t i = 0; i < o.size(); ++i) {
    o[i] = from_float<T>(static_cast<float>(i % 7) - 3.f);
    dout[i] = from_float<T>(static_cast<float>(i % 5) * 0.5f);
    dq_accum[i] = static_cast<float>(i % 11) - 5.f;
  }
  K::AttentionBackwardParams g;
  g.o = o.data();
  g.dout = dout.data();
  g.dq = dq.data();
  g.o_stride = g.dout_stride = g.dq_stride = dense;
  g.delta = delta.data();
  g.dq_accum = dq_accum.data();
  g.batch = B;
  g.seq_len = Tlen;
  g.heads = H;
  g.head_dim = D;
  g.dtype = K::DType::BF16;

  const KC::LaunchShape ds = KC::delta_shape(g);
  REQUIRE(ds.grid.x == 65535u);
  const unsigned last = ds.grid.x - 1;
  run_emulated(ds, [&] { KC::delta_kernel<T>(g); }, false, 5, [&](const dim3& blk) { return blk.x == last; });
  const int64_t rows = B * Tlen * H, warps_per_block = ds.block.x / 32, stride = ds.grid.x * warps_per_block;
  int64_t written = 0, wrong = 0, stray = 0;
  for (int64_t r = 0; r < rows; ++r) {  // r = (b * T + t) * H + h, as the kernel counts rows
    const int64_t h = r % H, t = (r / H) % Tlen, b = r / (H * Tlen);
    const float got = delta[(b * H + h) * Tlen + t];
    if ((r % stride) / warps_per_block != last) {
      stray += std::isnan(got) ? 0 : 1;
      continue;
    }
    float want = 0.f;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t at = b * dense.batch + t * dense.seq + h * dense.head + d;
      want += to_float(o[at]) * to_float(dout[at]);
    }
    ++written;
    wrong += std::abs(got - want) <= 1e-4f * (1.f + std::abs(want)) ? 0 : 1;
  }
  CHECK(written == 4 * warps_per_block);  // 32 x 65535 rows: four passes of 65535 x 8 warps, one row per warp each
  CHECK(wrong == 0);
  CHECK(stray == 0);

  const KC::LaunchShape cs = KC::convert_dq_shape(g);
  REQUIRE(cs.grid.x == 65535u);
  run_emulated(cs, [&] { KC::convert_dq_kernel<T>(g); }, false, 6,
               [&](const dim3& blk) { return blk.x == cs.grid.x - 1; });
  const int64_t threads = static_cast<int64_t>(cs.grid.x) * cs.block.x;
  written = wrong = stray = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(dq.size()); ++e) {  // dense: the element index is the accumulator's
    const float got = to_float(dq[e]);
    if (((e / 2) % threads) / cs.block.x != cs.grid.x - 1) {
      stray += std::isnan(got) ? 0 : 1;
      continue;
    }
    ++written;
    wrong += got == to_float(from_float<T>(dq_accum[e])) ? 0 : 1;
  }
  CHECK(written == 2 * 2 * static_cast<int64_t>(cs.block.x));  // two passes, two elements per thread
  CHECK(wrong == 0);
  CHECK(stray == 0);
#endif
}

TEST_CASE("emulated CUDA kernels at T 8192: the CTAs that stream the whole sequence", "[cuda][emulated][limits]") {
  PRISM_SKIP_WITHOUT_CUDA_HEADERS();
#ifdef PRISM_HAVE_CUDA_HEADERS
  check_long_sequence<__nv_bfloat16, 64>(8192);
  check_long_sequence<float, 32>(8192);
#endif
}

TEST_CASE("CUDA attention limits: sizes at the limits pass, past them are refused with the limit named",
          "[cuda][limits]") {
  namespace KC2 = prism::kernels::cuda;
  CHECK_NOTHROW(KC2::check_sizes(KC2::kMaxBatch, KC2::kMaxSeqLen, KC2::kMaxHeads, 256));
  CHECK_NOTHROW(KC2::check_sizes(1, 1, 1, 32));
  auto refusal = [](int64_t b, int64_t t, int64_t h, int64_t d) {
    try {
      KC2::check_sizes(b, t, h, d);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refusal(1, KC2::kMaxSeqLen + 1, 1, 64), Catch::Contains("2^30"));
  CHECK_THAT(refusal(1, 128, KC2::kMaxHeads + 1, 64), Catch::Contains("65536 heads") && Catch::Contains("grid y"));
  CHECK_THAT(refusal(KC2::kMaxBatch + 1, 128, 1, 64), Catch::Contains("batch 65536") && Catch::Contains("grid z"));
  CHECK_THAT(refusal(1, 128, 1, 48), Catch::Contains("head dim 48") && Catch::Contains("pad"));
  CHECK_THAT(refusal(0, 128, 1, 64), Catch::Contains("empty"));
  // Head dims without an instance pad to the next one; past 256 there is none.
  CHECK(KC2::padded_head_dim(48) == 64);
  CHECK(KC2::padded_head_dim(256) == 256);
  CHECK(KC2::padded_head_dim(257) == 0);
  CHECK(KC2::padded_head_dim(0) == 0);
  CHECK(KC2::supports_head_dim(192));
  CHECK_FALSE(KC2::supports_head_dim(160));
}
