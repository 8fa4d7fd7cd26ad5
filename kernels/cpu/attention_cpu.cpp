// Dispatch of the fused CPU attention kernel: picks the instruction set at run
// time and defines the workspace layout every ISA's kernel uses.
#include "cpu/attention_cpu.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cpu/workspace.h"

namespace prism::kernels::cpu {

// One definition per ISA translation unit (attention_<isa>.cpp).
namespace scalar {
void forward(const AttentionForwardParams& p, const Launch& launch);
void backward(const AttentionBackwardParams& p, const Launch& launch);
}  // namespace scalar
namespace avx512 {
void forward(const AttentionForwardParams& p, const Launch& launch);
void backward(const AttentionBackwardParams& p, const Launch& launch);
}  // namespace avx512
namespace avx512bf16 {
void forward(const AttentionForwardParams& p, const Launch& launch);
void backward(const AttentionBackwardParams& p, const Launch& launch);
}  // namespace avx512bf16

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t pad16(int64_t n) { return ceil_div(n, 16) * 16; }
int64_t take(int64_t& top, int64_t floats) {
  int64_t at = top;
  top += pad16(floats);
  return at;
}
}  // namespace

bool isa_supported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx512: return avx512;
    case Isa::Avx512Bf16: return avx512 && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == Isa::Scalar;
#endif
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::Avx512Bf16) ? Isa::Avx512Bf16
                          : isa_supported(Isa::Avx512)   ? Isa::Avx512
                                                         : Isa::Scalar;
  return best;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512_bf16";
  }
  return "?";
}

ForwardLayout forward_layout(const AttentionForwardParams& p, int num_threads, Isa /*isa*/) {
  ForwardLayout l;
  const int64_t dp = pad16(p.head_dim), nqb = ceil_div(p.seq_len, kBlockQ), bh = p.batch * p.heads;
  // Up to 4 query blocks per work item, fewer when that would leave threads idle.
  l.group = 4;
  while (l.group > 1 && bh * ceil_div(nqb, l.group) < 4 * num_threads) l.group /= 2;
  int64_t top = 0;
  l.q_tile_size = pad16(p.head_dim * kBlockQ);
  l.q_tile = take(top, l.group * l.q_tile_size);
  l.out_acc = take(top, l.group * kBlockQ * dp);
  l.row_stats = take(top, l.group * 4 * kBlockQ);
  l.score_tile = take(top, kBlockK * kBlockQ);
  l.kv_tiles = take(top, 2 * kBlockK * dp);
  l.p_pairs = take(top, kBlockK * kBlockQ / 2);
  l.per_thread = top;
  l.total = top * num_threads;
  return l;
}

BackwardLayout backward_layout(const AttentionBackwardParams& p, int num_threads, Isa isa) {
  BackwardLayout l;
  // The bf16 pair path keeps q and dout as bf16: half the floats.
  const bool pairs = p.dtype == DType::BF16 && isa == Isa::Avx512Bf16;
  const int64_t bh = p.batch * p.heads, T = p.seq_len, D = p.head_dim, dp = pad16(D);
  const int64_t nqb = ceil_div(T, kBlockQ), nkb = ceil_div(T, kBlockK);
  // Enough work items to keep every thread busy: split the key blocks of each
  // (b, h) when there are few of them; each split keeps its own dq partial sum.
  if (num_threads > 1 && bh < 2 * num_threads)
    l.nsplit = std::max<int64_t>(1, std::min(nkb, ceil_div(2 * num_threads, bh)));
  l.dq_direct = p.dtype == DType::F32;
  l.n_partial = l.nsplit > 1 ? l.nsplit - (l.dq_direct ? 1 : 0) : 0;
  int64_t top = 0;
  if (l.n_partial > 0) l.dq_partial = take(top, l.n_partial * bh * T * D);
  l.scratch = top;
  int64_t t = 0;
  l.rows = take(t, (pairs ? 1 : 2) * nqb * kBlockQ * dp);
  l.pack_stride = pad16((pairs ? (D + 1) / 2 : D) * kBlockQ);
  l.q_packed = take(t, nqb * l.pack_stride);
  l.dout_packed = take(t, nqb * l.pack_stride);
  l.delta = take(t, nqb * kBlockQ);
  if (p.dtype == DType::BF16 && l.nsplit == 1) l.dq_acc = take(t, T * D);
  l.tiles = take(t, 2 * kBlockK * kBlockQ + 4 * kBlockK * dp + kBlockK * dp);
  if (pairs) l.pair_tiles = take(t, 3 * kBlockK * kBlockQ / 2);
  l.per_thread = t;
  l.total = top + t * num_threads;
  return l;
}

std::size_t forward_workspace_bytes(const AttentionForwardParams& p, int num_threads, Isa isa) {
  return static_cast<std::size_t>(forward_layout(p, num_threads, isa).total) * sizeof(float);
}

std::size_t backward_workspace_bytes(const AttentionBackwardParams& p, int num_threads, Isa isa) {
  return static_cast<std::size_t>(backward_layout(p, num_threads, isa).total) * sizeof(float);
}

namespace {
void check(DType dtype, Isa isa, const char* who) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw std::invalid_argument(std::string(who) + ": only fp32 and bf16 inputs are supported");
  if (!isa_supported(isa))
    throw std::invalid_argument(std::string(who) + ": " + isa_name(isa) + " is not supported by this CPU");
}
}  // namespace

void attention_forward(const AttentionForwardParams& p, const Launch& launch) {
  check(p.dtype, launch.isa, "attention_forward");
  switch (launch.isa) {
    case Isa::Scalar: return scalar::forward(p, launch);
    case Isa::Avx512: return avx512::forward(p, launch);
    case Isa::Avx512Bf16: return avx512bf16::forward(p, launch);
  }
}

void attention_backward(const AttentionBackwardParams& p, const Launch& launch) {
  check(p.dtype, launch.isa, "attention_backward");
  switch (launch.isa) {
    case Isa::Scalar: return scalar::backward(p, launch);
    case Isa::Avx512: return avx512::backward(p, launch);
    case Isa::Avx512Bf16: return avx512bf16::backward(p, launch);
  }
}

}  // namespace prism::kernels::cpu
