#pragma once
// Device helpers shared by the CUDA attention kernels: element types, async
// copies, ldmatrix/mma.sync wrappers and error checks. sm_80+ only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/attention_params.h"
#ifdef PRISM_CUDA_EMULATION
#include "cuda/emulation.h"  // tests run this same kernel source on the CPU
#endif

namespace prism::kernels::cuda {

#ifndef PRISM_CUDA_EMULATION
inline void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("prism CUDA attention: ") + what + " failed: " + cudaGetErrorString(err) +
                             " (" + file + ":" + std::to_string(line) + ")");
}
#define PRISM_CUDA_CHECK(call) ::prism::kernels::cuda::check_cuda((call), #call, __FILE__, __LINE__)
// After a launch: configuration errors surface here, not at the next sync.
#define PRISM_CUDA_CHECK_LAUNCH(name) ::prism::kernels::cuda::check_cuda(cudaGetLastError(), name, __FILE__, __LINE__)
#endif

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- element types -----------------------------------------------------------
template <typename T> struct ElemTraits;
template <> struct ElemTraits<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return bits;
  }
};
template <> struct ElemTraits<__half> {
  using Pair = __half2;
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return bits;
  }
};
template <> struct ElemTraits<float> {
  static __device__ __forceinline__ float to_float(float x) { return x; }
  static __device__ __forceinline__ float from_float(float x) { return x; }
};

// Row pointer of (b, t, h) in a (B, T, H, D) strided tensor.
template <typename T>
__device__ __forceinline__ T* row_ptr(T* base, const Strides& s, int64_t b, int64_t t, int64_t h) {
  return base + b * s.batch + t * s.seq + h * s.head;
}

// ---- the device-specific primitives: inline PTX on the GPU, emulated on the host ----
#ifndef PRISM_CUDA_EMULATION  // else emulation.h (included above) defines these on the host
// The kernel's dynamic shared memory.
#define PRISM_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Async global -> shared copy (cp.async, sm_80) of 16 bytes, or 16 zero bytes
// when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Four 8x8 matrices of 16-bit elements from shared memory (lanes 8i..8i+7 give
// the row addresses of matrix i); register i of a lane holds its part of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

template <typename T> struct Mma;
template <> struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

#endif  // PRISM_CUDA_EMULATION

// Loads a rows x D tile of 2-byte elements (rows starting at `row0`, valid while
// < n_valid) into shared memory with row stride `ld` elements. Rows past n_valid
// are zero-filled, so padded keys contribute nothing and padded queries stay finite.
template <int D, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* smem, int ld, const T* gbase, int64_t seq_stride, int row0,
                                                int rows, int n_valid) {
  constexpr int kChunks = D * sizeof(T) / 16;  // 16-byte chunks per row
  constexpr int kPerChunk = 16 / sizeof(T);
  for (int i = threadIdx.x; i < rows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = row0 + r;
    const bool valid = row < n_valid;
    const T* src = valid ? gbase + static_cast<int64_t>(row) * seq_stride + c * kPerChunk : gbase;
    cp_async_16(smem + r * ld + c * kPerChunk, src, valid);
  }
}

// ---- tensor-core fragments (mma.sync.m16n8k16, fp32 accumulate) -----------------
// Fragment layouts follow the PTX ISA: with g = lane / 4 and q = lane % 4,
//   A (16x16, row):  a0 = (g, 2q..2q+1)  a1 = (g+8, 2q..)  a2 = (g, 2q+8..)  a3 = (g+8, 2q+8..)
//   B (16x8, col):   b0 = (k 2q..2q+1, n g)  b1 = (k 2q+8.., n g)
//   C (16x8, f32):   c0,c1 = (g, 2q..2q+1)   c2,c3 = (g+8, 2q..2q+1)
// where each a/b register holds two 16-bit elements, the lower column/k first.

// A fragment (16 x 16 at rows m0, cols k0) of a matrix stored row-major M x K in smem.
template <typename T>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const T* s, int ld, int m0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
  // matrices: (m0, k0) (m0+8, k0) (m0, k0+8) (m0+8, k0+8) -> a0 a1 a2 a3
  ldmatrix_x4(a, s + (m0 + (mi & 1) * 8 + r) * ld + k0 + (mi >> 1) * 8);
}
// A fragment of A = S^T where S is stored row-major K x M in smem (A[m][k] = S[k][m]).
template <typename T>
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const T* s, int ld, int m0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
  // transposed 8x8 blocks of S: (k0, m0) (k0, m0+8) (k0+8, m0) (k0+8, m0+8) -> a0 a1 a2 a3
  ldmatrix_x4_trans(a, s + (k0 + (mi >> 1) * 8 + r) * ld + m0 + (mi & 1) * 8);
}
// B fragments of two adjacent 8-column blocks (n0, n0+8), k rows k0..k0+15, where
// B is stored as N x K row-major in smem (B[k][n] = S[n][k], e.g. K for Q K^T).
// b[0], b[1] belong to columns n0..n0+7; b[2], b[3] to n0+8..n0+15.
template <typename T>
__device__ __forceinline__ void load_b_pair(uint32_t (&b)[4], const T* s, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
  // blocks of S: (n0, k0) (n0, k0+8) (n0+8, k0) (n0+8, k0+8)
  ldmatrix_x4(b, s + (n0 + (mi >> 1) * 8 + r) * ld + k0 + (mi & 1) * 8);
}
// The same, for B stored as K x N row-major (B[k][n] = S[k][n], e.g. V for P V).
template <typename T>
__device__ __forceinline__ void load_b_pair_trans(uint32_t (&b)[4], const T* s, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
  // transposed blocks of S: (k0, n0) (k0+8, n0) (k0, n0+8) (k0+8, n0+8)
  ldmatrix_x4_trans(b, s + (k0 + (mi & 1) * 8 + r) * ld + n0 + (mi >> 1) * 8);
}

// acc[NF][4] += A (16 x K, rows m0) * B (K x 8*NF, cols n0), operands in smem.
// kATrans/kBTrans select the storage order described at load_a*/load_b_pair*.
template <typename T, int K, int NF, bool kATrans, bool kBTrans>
__device__ __forceinline__ void warp_gemm(float (&acc)[NF][4], const T* sa, int lda, int m0, const T* sb, int ldb,
                                          int n0) {
  static_assert(NF % 2 == 0, "B fragments are loaded in pairs");
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[4];
    if constexpr (kATrans) load_a_trans(a, sa, lda, m0, k0);
    else load_a(a, sa, lda, m0, k0);
#pragma unroll
    for (int nf = 0; nf < NF; nf += 2) {
      uint32_t b[4];
      if constexpr (kBTrans) load_b_pair_trans(b, sb, ldb, n0 + nf * 8, k0);
      else load_b_pair(b, sb, ldb, n0 + nf * 8, k0);
      Mma<T>::run(acc[nf], a, b[0], b[1]);
      Mma<T>::run(acc[nf + 1], a, b[2], b[3]);
    }
  }
}

template <int NF>
__device__ __forceinline__ void zero(float (&acc)[NF][4]) {
#pragma unroll
  for (int i = 0; i < NF; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
}

// Max / sum over the 4 lanes of a quad (the lanes that share a C-fragment row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Grid, block and dynamic shared memory of one kernel launch.
struct LaunchShape {
  dim3 grid, block;
  size_t smem = 0;
};

#ifndef PRISM_CUDA_EMULATION
// Launches kernel(p) with the shape on the stream, raising the dynamic shared
// memory limit above the 48 KB default when needed; `name` labels errors.
template <typename Kernel, typename Params>
inline void launch(Kernel kernel, const LaunchShape& s, const Params& p, const char* name) {
  if (s.smem > 48 * 1024)
    PRISM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(s.smem)));
  kernel<<<s.grid, s.block, s.smem, static_cast<cudaStream_t>(p.stream)>>>(p);
  PRISM_CUDA_CHECK_LAUNCH(name);
}
#endif

}  // namespace prism::kernels::cuda
