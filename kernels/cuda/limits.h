#pragma once
// The CUDA attention kernels' size limits, in plain C++ so that the host code and
// the tests without a GPU check the same numbers the launches rely on
// (kernels/cuda/NOTES.md, "Limits"; test/cuda/test_cuda_emulated.cpp runs the
// kernels under emulation at them).
#include <cstdint>
#include <stdexcept>
#include <string>

namespace prism::kernels::cuda {

// Head dims with a compiled kernel instance; the binding pads others to the next.
constexpr int kHeadDims[] = {32, 64, 96, 128, 192, 256};
// Query and key rows are 32-bit ints inside the kernels (offsets are 64-bit).
constexpr int64_t kMaxSeqLen = (int64_t{1} << 30) - 1;
// Heads run along grid y and batch along grid z, each at most 65535 blocks.
constexpr int64_t kMaxHeads = 65535;
constexpr int64_t kMaxBatch = 65535;

// Head dims with a compiled instance.
inline bool supports_head_dim(int64_t head_dim) {
  for (int d : kHeadDims)
    if (d == head_dim) return true;
  return false;
}

// The smallest compiled head dim >= head_dim, or 0 if there is none.
inline int64_t padded_head_dim(int64_t head_dim) {
  if (head_dim <= 0) return 0;
  for (int d : kHeadDims)
    if (d >= head_dim) return d;
  return 0;
}

// Throws std::runtime_error naming the limit a launch of these sizes would break.
inline void check_sizes(int64_t batch, int64_t seq_len, int64_t heads, int64_t head_dim) {
  auto fail = [](const std::string& what) { throw std::runtime_error("prism CUDA attention: " + what); };
  if (batch <= 0 || seq_len <= 0 || heads <= 0)
    fail("empty batch, sequence or heads (batch " + std::to_string(batch) + ", sequence " + std::to_string(seq_len) +
         ", heads " + std::to_string(heads) + ")");
  if (seq_len > kMaxSeqLen)
    fail("sequence length " + std::to_string(seq_len) + " is past the kernels' limit of 2^30 - 1 (32-bit row indices)");
  if (heads > kMaxHeads)
    fail(std::to_string(heads) + " heads is past the kernels' limit of 65535 (grid y); split the heads into batches");
  if (batch > kMaxBatch)
    fail("batch " + std::to_string(batch) + " is past the kernels' limit of 65535 (grid z); split the batch");
  if (!supports_head_dim(head_dim))
    fail("head dim " + std::to_string(head_dim) + " has no kernel instance (32, 64, 96, 128, 192, 256); pad to the next one");
}

}  // namespace prism::kernels::cuda
