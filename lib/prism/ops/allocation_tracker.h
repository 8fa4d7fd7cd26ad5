#pragma once
// Counts the bytes LibTorch's CPU allocator hands out, so benchmarks and tests
// can measure the peak extra memory of an operation (e.g. that fused attention
// allocates nothing that grows with T x T). Every CPU tensor, and the fused
// kernel's workspace (allocated as a tensor), goes through it; memory that
// libraries allocate on their own (oneDNN scratch pads, OpenMP stacks) does not.
#include <cstdint>

namespace prism::attention {

class CpuAllocationTracker {
 public:
  // Wraps LibTorch's CPU allocator; idempotent, permanent for the process.
  static void install();
  static bool installed();
  static int64_t live_bytes();
  static int64_t peak_bytes();
  static void reset_peak();  // peak := live
};

// Peak bytes allocated above what was live when the scope began.
class PeakAllocationScope {
 public:
  PeakAllocationScope();
  int64_t extra_bytes() const;

 private:
  int64_t base_;
};

}  // namespace prism::attention
