// Dispatch of the fused CPU attention kernel: which code paths this build and
// this CPU have, the choice at run time (PRISM_CPU_ISA may select one), and
// the workspace layout every code path uses.
#include "cpu/attention_cpu.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu/attention_targets.h"
#include "cpu/workspace.h"

namespace prism::kernels::cpu {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t pad16(int64_t n) { return ceil_div(n, 16) * 16; }
int64_t take(int64_t& top, int64_t floats) {
  int64_t at = top;
  top += pad16(floats);
  return at;
}

bool cpu_reports_avx512bf16() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// Whether this CPU has AMX-BF16 tiles and the OS lets this process use them:
// CPUID.7.0:EDX bits 22 (AMX-BF16) and 24 (AMX-TILE), XCR0 bits 17-18 (the
// OS saves tile state), and Linux's per-process permission for the 8 KB tile
// data (arch_prctl ARCH_REQ_XCOMP_PERM, kernel 5.16+), requested once here.
bool amx_usable() {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: xgetbv is allowed
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

// The pair products of the bf16 path run on the AVX512-BF16 and AMX builds.
bool pair_path(DType dtype, Isa isa) { return dtype == DType::BF16 && (isa == Isa::Avx512Bf16 || isa == Isa::Amx); }

const Isa kAllIsas[] = {Isa::Avx512Bf16, Isa::Amx,  Isa::Avx512, Isa::Avx2,     Isa::Sve2_128, Isa::Sve256,
                        Isa::Sve2,       Isa::Sve,  Isa::Neon,   Isa::Portable, Isa::Scalar};

}  // namespace

const TargetKernel* kernel_of(Isa isa) {
  if (isa == Isa::Avx512Bf16) return bf16_dot_kernel();
  if (isa == Isa::Amx) return amx_kernel();
  for (const auto& k : simd_kernels())
    if (k.isa == isa) return &k;
  return nullptr;
}

const std::vector<Isa>& compiled_isas() {
  static const std::vector<Isa> isas = [] {
    std::vector<Isa> v;
    for (Isa isa : kAllIsas)
      if (isa == Isa::Scalar || kernel_of(isa)) v.push_back(isa);
    return v;
  }();
  return isas;
}

bool isa_supported(Isa isa) {
  if (isa == Isa::Scalar) return true;
  const TargetKernel* k = kernel_of(isa);
  if (!k || !(hwy_supported_targets() & k->hwy_target)) return false;
  if ((isa == Isa::Avx512Bf16 || isa == Isa::Amx) && !cpu_reports_avx512bf16()) return false;
  if (isa == Isa::Amx && !amx_usable()) return false;
  // A 64-wide tile must be a whole number of vectors: SVE lengths of 384 or
  // 640 bits (12 or 20 floats) are not, and take the NEON path instead.
  const int64_t n = k->vector_floats();
  return n <= 16 && 64 % n == 0;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Portable: return "portable";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512_bf16";
    case Isa::Amx: return "amx";
    case Isa::Neon: return "neon";
    case Isa::Sve: return "sve";
    case Isa::Sve2: return "sve2";
    case Isa::Sve256: return "sve_256";
    case Isa::Sve2_128: return "sve2_128";
  }
  return "?";
}

std::string isa_description(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar C++ reference in double precision (for tests, never chosen by auto)";
    case Isa::Portable: return "Highway's portable baseline target (EMU128, or SCALAR on GCC < 12.3): plain C++";
    case Isa::Avx2: return "Highway AVX2 target: 256-bit AVX2 + FMA";
    case Isa::Avx512: return "Highway AVX3 target: 512-bit AVX-512 F/BW/DQ/VL";
    case Isa::Avx512Bf16: return "Highway AVX3 target + AVX512-BF16 pair dot products for bf16 inputs";
    case Isa::Amx: return "Highway AVX3 target + AMX tile products (TDPBF16PS) for bf16 inputs";
    case Isa::Neon: return "Highway NEON target: 128-bit Arm NEON";
    case Isa::Sve: return "Highway SVE target: Arm SVE, vector length read at run time";
    case Isa::Sve2: return "Highway SVE2 target: Arm SVE2, vector length read at run time";
    case Isa::Sve256: return "Highway SVE_256 target: Arm SVE with 256-bit vectors";
    case Isa::Sve2_128: return "Highway SVE2_128 target: Arm SVE2 with 128-bit vectors";
  }
  return "?";
}

Isa isa_by_name(const std::string& name) {
  std::string names;
  for (Isa isa : compiled_isas()) {
    if (name == isa_name(isa)) return isa;
    names += (names.empty() ? "" : ", ") + std::string(isa_name(isa));
  }
  throw std::invalid_argument("unknown CPU code path '" + name + "'; this build has: " + names);
}

bool cpu_has_native_bf16() {
#if defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP2) & (1ul << 14)) != 0;  // HWCAP2_BF16: BFDOT, BFMMLA
#else
  return cpu_reports_avx512bf16();
#endif
}

Isa best_isa() {
  static const Isa best = [] {
    if (const char* env = std::getenv("PRISM_CPU_ISA"); env && *env) {
      const Isa isa = isa_by_name(env);
      if (!isa_supported(isa))
        throw std::invalid_argument(std::string("PRISM_CPU_ISA=") + env + ": this CPU cannot run that code path");
      return isa;
    }
    for (Isa isa : compiled_isas())
      if (isa_supported(isa)) return isa;
    return Isa::Scalar;
  }();
  return best;
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
  const bool pairs = pair_path(p.dtype, isa);
  const int64_t bh = p.batch * p.heads, T = p.seq_len, D = p.head_dim, dp = pad16(D);
  const int64_t nqb = ceil_div(T, kBlockQ), nkb = ceil_div(T, kBlockK);
  // Enough work items to keep every thread busy: split the key blocks of each
  // (b, h) when there are few of them; each split keeps its own dq partial sum.
  if (num_threads > 1 && bh < 2 * num_threads)
    l.nsplit = std::max<int64_t>(1, std::min(nkb, ceil_div(2 * num_threads, bh)));
  // dq is summed in fp32 workspace rows, dense per (b, h), and written out
  // once at the end: summing into the caller's dq, whose rows are H D apart,
  // spreads every pass over thousands of pages (measured: AVX2 backward 20%
  // slower at T 4096, AVX-512 11%).
  l.n_partial = l.nsplit > 1 ? l.nsplit : 0;
  int64_t top = 0;
  if (l.n_partial > 0) l.dq_partial = take(top, l.n_partial * bh * T * dp);
  l.scratch = top;
  int64_t t = 0;
  l.rows = take(t, (pairs ? 1 : 2) * nqb * kBlockQ * dp);
  l.pack_stride = pad16((pairs ? (D + 1) / 2 : D) * kBlockQ);
  l.q_packed = take(t, nqb * l.pack_stride);
  l.dout_packed = take(t, nqb * l.pack_stride);
  l.delta = take(t, nqb * kBlockQ);
  if (l.nsplit == 1) l.dq_acc = take(t, T * dp);
  l.tiles = take(t, 2 * kBlockK * kBlockQ + 4 * kBlockK * dp + kBlockK * dp);
  if (pairs) l.pair_tiles = take(t, 3 * kBlockK * kBlockQ / 2);
  l.per_thread = t;
  l.total = top + t * num_threads;
  return l;
}

std::size_t forward_workspace_bytes(const AttentionForwardParams& p, int num_threads, Isa isa) {
  if (isa == Isa::Scalar) return 0;
  return static_cast<std::size_t>(forward_layout(p, num_threads, isa).total) * sizeof(float);
}

std::size_t backward_workspace_bytes(const AttentionBackwardParams& p, int num_threads, Isa isa) {
  if (isa == Isa::Scalar) return 0;
  return static_cast<std::size_t>(backward_layout(p, num_threads, isa).total) * sizeof(float);
}

namespace {
void check(DType dtype, Isa isa, const char* who) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw std::invalid_argument(std::string(who) + ": only fp32 and bf16 inputs are supported");
  if (!isa_supported(isa))
    throw std::invalid_argument(std::string(who) + ": this CPU (or build) cannot run the " + isa_name(isa) +
                                " code path");
}
}  // namespace

void attention_forward(const AttentionForwardParams& p, const Launch& launch) {
  check(p.dtype, launch.isa, "attention_forward");
  if (launch.isa == Isa::Scalar) return reference::forward(p, launch);
  kernel_of(launch.isa)->forward(p, launch);
}

void attention_backward(const AttentionBackwardParams& p, const Launch& launch) {
  check(p.dtype, launch.isa, "attention_backward");
  if (launch.isa == Isa::Scalar) return reference::backward(p, launch);
  kernel_of(launch.isa)->backward(p, launch);
}

}  // namespace prism::kernels::cpu
