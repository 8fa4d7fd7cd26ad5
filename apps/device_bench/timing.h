#pragma once
// Device timing: CUDA events around each run on the current stream, median taken;
// and the caching allocator's peak memory.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace prism::device_bench {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Median device time in milliseconds of `iters` runs of `timed` after `warmup` runs;
// `setup` runs before each, outside the timed region (e.g. the forward of a backward).
template <typename S, typename F>
double median_ms_split(S&& setup, F&& timed, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) {
    setup();
    timed();
  }
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(iters));
  for (auto& e : ev) cuda_ok(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < iters; ++i) {
    setup();
    cuda_ok(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    timed();
    cuda_ok(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
  }
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<float> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) cuda_ok(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <typename F>
double median_ms(F&& fn, int warmup, int iters) {
  return median_ms_split([] {}, std::forward<F>(fn), warmup, iters);
}

// Peak bytes the caching allocator handed out on the current device since the last reset.
inline void reset_peak_memory() {
  c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
}
inline double peak_memory_gb() {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  return static_cast<double>(stats.allocated_bytes[0].peak) / 1e9;  // [0]: StatType::AGGREGATE
}

}  // namespace prism::device_bench
