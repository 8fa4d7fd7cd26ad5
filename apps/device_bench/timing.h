#pragma once
// Device timing: CUDA events around each run on the current stream, median taken.
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace prism::device_bench {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Median device time in milliseconds of `iters` runs of fn after `warmup` runs.
template <typename F>
double median_ms(F&& fn, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(iters));
  for (auto& e : ev) cuda_ok(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < iters; ++i) {
    cuda_ok(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    fn();
    cuda_ok(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
  }
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<float> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) cuda_ok(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace prism::device_bench
