#pragma once
// Host emulation of the CUDA primitives the attention kernels use, so tests run
// the kernels' unmodified source on the CPU (no GPU on CI machines). Included by
// common.cuh when PRISM_CUDA_EMULATION is defined, and only then.
//
// Every CUDA thread of a block is a ucontext fiber on one OS thread. The
// scheduler advances one warp at a time, lane by lane, to its next collective
// (shuffle, ldmatrix, mma) and completes it for the 32 lanes together, as the
// hardware does; __syncthreads holds a warp until every warp of the block is
// there. The warp to advance next is drawn at random, so different seeds give
// different interleavings between barriers. cp.async copies land either at
// issue or at wait_group (the two ends of their real window): a kernel that
// reads a tile before waiting, or overwrites one still in use, fails one of them.
// The mma computes D = A B + C in fp32 from the 16-bit inputs, like the tensor cores.
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// Device-only qualifiers mean nothing on the host.
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __launch_bounds__
#define __launch_bounds__(...)

namespace prism::kernels::cuda::emu {

enum class Op { None, Shfl, Ldmatrix, Mma, Barrier, Done };

struct Copy {
  void* dst;
  const void* src;  // nullptr: zero-fill
};

struct Fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  dim3 tid;
  Op op = Op::None;
  // Collective operands (in) and results (out).
  float value = 0.f;
  int src_lane = 0;
  const void* addr = nullptr;
  bool trans = false;
  bool bf16 = true;
  uint32_t regs[4] = {};
  uint32_t a[4] = {}, b[2] = {};
  float c[4] = {};
  std::vector<Copy> pending;
};

struct Block {
  dim3 idx;
  std::vector<unsigned char> smem;
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  Fiber* current = nullptr;
  std::function<void()> kernel;
};

struct Launch {
  dim3 grid, block;
  bool copies_at_issue = false;
};

inline Block*& current_block() {
  static Block* b = nullptr;
  return b;
}
inline Launch& current_launch() {
  static Launch l;
  return l;
}
inline Fiber& self() { return *current_block()->current; }

// Hands control back to the scheduler with a pending operation.
inline void yield(Op op) {
  Fiber& f = self();
  f.op = op;
  swapcontext(&f.ctx, &current_block()->scheduler);
}

inline const dim3& thread_idx() { return self().tid; }
inline const dim3& block_idx() { return current_block()->idx; }
inline const dim3& grid_dim() { return current_launch().grid; }
inline const dim3& block_dim() { return current_launch().block; }
inline unsigned char* dynamic_smem() { return current_block()->smem.data() + 64; }  // 64 guard bytes in front

inline void sync_block() { yield(Op::Barrier); }

inline float shfl(float v, int src_lane) {
  Fiber& f = self();
  f.value = v;
  f.src_lane = src_lane & 31;
  yield(Op::Shfl);
  return self().value;
}
inline float shfl_xor(float v, int lane_mask) { return shfl(v, static_cast<int>(thread_idx().x & 31) ^ lane_mask); }

inline float atomic_add(float* p, float v) {  // one OS thread: plain arithmetic is atomic
  const float old = *p;
  *p = old + v;
  return old;
}

inline void copy16(const Copy& c) {
  if (c.src) std::memcpy(c.dst, c.src, 16);
  else std::memset(c.dst, 0, 16);
}

}  // namespace prism::kernels::cuda::emu

#define threadIdx (::prism::kernels::cuda::emu::thread_idx())
#define blockIdx (::prism::kernels::cuda::emu::block_idx())
#define gridDim (::prism::kernels::cuda::emu::grid_dim())
#define blockDim (::prism::kernels::cuda::emu::block_dim())
#define __syncthreads() ::prism::kernels::cuda::emu::sync_block()
#define __shfl_xor_sync(mask, v, lane_mask) ::prism::kernels::cuda::emu::shfl_xor((v), (lane_mask))
#define __shfl_sync(mask, v, src_lane) ::prism::kernels::cuda::emu::shfl((v), (src_lane))
#define atomicAdd(p, v) ::prism::kernels::cuda::emu::atomic_add((p), (v))
#define PRISM_DYNAMIC_SMEM(name) unsigned char* name = ::prism::kernels::cuda::emu::dynamic_smem()

namespace prism::kernels::cuda {

using std::max;
using std::min;

inline void cp_async_16(void* smem, const void* gmem, bool valid) {
  const emu::Copy c{smem, valid ? gmem : nullptr};
  if (emu::current_launch().copies_at_issue) emu::copy16(c);
  else emu::self().pending.push_back(c);
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {
  auto& pending = emu::self().pending;
  for (const auto& c : pending) emu::copy16(c);
  pending.clear();
}

inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  emu::Fiber& f = emu::self();
  f.addr = smem;
  f.trans = false;
  emu::yield(emu::Op::Ldmatrix);
  std::copy(f.regs, f.regs + 4, r);
}
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  emu::Fiber& f = emu::self();
  f.addr = smem;
  f.trans = true;
  emu::yield(emu::Op::Ldmatrix);
  std::copy(f.regs, f.regs + 4, r);
}

template <typename T>
struct Mma {
  static void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu::Fiber& f = emu::self();
    std::copy(a, a + 4, f.a);
    f.b[0] = b0;
    f.b[1] = b1;
    std::copy(c, c + 4, f.c);
    f.bf16 = std::is_same<T, __nv_bfloat16>::value;
    emu::yield(emu::Op::Mma);
    std::copy(f.c, f.c + 4, c);
  }
};

namespace emu {

inline float half_bits_to_float(uint16_t bits, bool bf16) {
  if (bf16) {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// Completes a collective for the 32 fibers of a warp (all posted the same op).
inline void complete(Fiber* lanes, Op op) {
  if (op == Op::Shfl) {
    float v[32];
    for (int l = 0; l < 32; ++l) v[l] = lanes[lanes[l].src_lane].value;
    for (int l = 0; l < 32; ++l) lanes[l].value = v[l];
  } else if (op == Op::Ldmatrix) {
    for (int i = 0; i < 4; ++i) {
      uint16_t m[8][8];  // matrix i: row j from the address of lane 8 i + j
      for (int j = 0; j < 8; ++j) std::memcpy(m[j], lanes[8 * i + j].addr, 16);
      for (int l = 0; l < 32; ++l) {
        const int r = l / 4, c = 2 * (l % 4);
        const uint16_t lo = lanes[l].trans ? m[c][r] : m[r][c];
        const uint16_t hi = lanes[l].trans ? m[c + 1][r] : m[r][c + 1];
        lanes[l].regs[i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
      }
    }
  } else if (op == Op::Mma) {
    float A[16][16], B[16][8];
    const bool bf16 = lanes[0].bf16;
    auto lo = [&](uint32_t r) { return half_bits_to_float(static_cast<uint16_t>(r & 0xffff), bf16); };
    auto hi = [&](uint32_t r) { return half_bits_to_float(static_cast<uint16_t>(r >> 16), bf16); };
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, q = 2 * (l % 4);
      const uint32_t* a = lanes[l].a;
      A[g][q] = lo(a[0]), A[g][q + 1] = hi(a[0]);
      A[g + 8][q] = lo(a[1]), A[g + 8][q + 1] = hi(a[1]);
      A[g][q + 8] = lo(a[2]), A[g][q + 9] = hi(a[2]);
      A[g + 8][q + 8] = lo(a[3]), A[g + 8][q + 9] = hi(a[3]);
      B[q][g] = lo(lanes[l].b[0]), B[q + 1][g] = hi(lanes[l].b[0]);
      B[q + 8][g] = lo(lanes[l].b[1]), B[q + 9][g] = hi(lanes[l].b[1]);
    }
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, q = 2 * (l % 4);
      for (int e = 0; e < 4; ++e) {
        const int row = g + (e >= 2 ? 8 : 0), col = q + (e & 1);
        float acc = lanes[l].c[e];
        for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
        lanes[l].c[e] = acc;
      }
    }
  }
}

inline void fiber_main() {
  current_block()->kernel();
  self().op = Op::Done;
  swapcontext(&self().ctx, &current_block()->scheduler);
}

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kSmemGuard = 64;

// Which blocks of a grid run() executes: all of them when empty. A test at the
// kernels' limits (65535 heads, a very long sequence) launches the real grid and
// runs only the blocks it checks, e.g. the last along each axis.
using BlockFilter = std::function<bool(const dim3& block_idx)>;

// Runs kernel() as a grid of `shape.grid` blocks of `shape.block.x` threads, block
// after block (those `only` accepts, when given). Throws std::runtime_error on a
// divergent collective, a barrier that not every thread reaches, or a write
// outside the dynamic shared memory.
inline void run(const dim3& grid, const dim3& block, size_t smem_bytes, const std::function<void()>& kernel,
                bool copies_at_issue, unsigned seed, const BlockFilter& only = nullptr) {
  if (block.x % 32 != 0 || block.y != 1 || block.z != 1)
    throw std::runtime_error("emulation: blocks must be 1-D whole warps");
  Launch& launch = current_launch();
  launch = {grid, block, copies_at_issue};
  std::mt19937 rng(seed);
  const int warps = static_cast<int>(block.x / 32);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        if (only && !only(dim3(bx, by, bz))) continue;
        Block blk;
        blk.idx = dim3(bx, by, bz);
        blk.smem.assign(smem_bytes + 2 * kSmemGuard, 0xA5);  // guards and poison
        blk.kernel = kernel;
        blk.fibers.resize(block.x);
        current_block() = &blk;
        for (unsigned t = 0; t < block.x; ++t) {
          Fiber& f = blk.fibers[t];
          f.tid = dim3(t, 0, 0);
          f.stack.reset(new char[kStackBytes]);
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.get();
          f.ctx.uc_stack.ss_size = kStackBytes;
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, fiber_main, 0);
        }
        enum class State { Running, AtBarrier, Done };
        std::vector<State> state(warps, State::Running);
        while (true) {
          std::vector<int> running;
          for (int w = 0; w < warps; ++w)
            if (state[w] == State::Running) running.push_back(w);
          if (running.empty()) {
            const auto at_barrier = std::count(state.begin(), state.end(), State::AtBarrier);
            if (at_barrier == 0) break;  // every warp is done
            if (at_barrier != warps)
              throw std::runtime_error("emulation: __syncthreads not reached by every thread of the block");
            std::fill(state.begin(), state.end(), State::Running);
            continue;
          }
          // Advance one warp, drawn at random, by one step: to its next collective or barrier.
          const int w = running[std::uniform_int_distribution<size_t>(0, running.size() - 1)(rng)];
          Fiber* lanes = &blk.fibers[32 * w];
          for (int l = 0; l < 32; ++l) {
            blk.current = &lanes[l];
            swapcontext(&blk.scheduler, &lanes[l].ctx);
          }
          const Op op = lanes[0].op;
          for (int l = 1; l < 32; ++l)
            if (lanes[l].op != op)
              throw std::runtime_error("emulation: lanes of warp " + std::to_string(w) + " diverged at a collective");
          if (op == Op::Barrier) state[w] = State::AtBarrier;
          else if (op == Op::Done) state[w] = State::Done;
          else complete(lanes, op);
        }
        for (size_t i = 0; i < kSmemGuard; ++i)
          if (blk.smem[i] != 0xA5 || blk.smem[kSmemGuard + smem_bytes + i] != 0xA5)
            throw std::runtime_error("emulation: write outside the dynamic shared memory");
        current_block() = nullptr;
      }
}

}  // namespace emu
}  // namespace prism::kernels::cuda
