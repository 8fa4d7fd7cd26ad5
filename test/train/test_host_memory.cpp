// Prism's host memory policy (lib/prism/train/host_memory.h): every block comes
// from glibc's heap, and memory freed at its top stays there for the next step
// instead of going back to the kernel (to be page-faulted in again).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "memory_limit.h"
#include "prism/train/host_memory.h"

namespace {

bool in_heap(const void* p, const void* heap_end) {
  // The heap grows up from the program break; mmapped blocks lie far above it.
  return reinterpret_cast<uintptr_t>(p) < reinterpret_cast<uintptr_t>(heap_end);
}

}  // namespace

TEST_CASE("Prism's host memory policy keeps a step's freed blocks in the heap", "[train][memory]") {
  const auto& policy = prism::keep_freed_host_memory();
  INFO("policy: " << policy.reason);
  if (prism::test::kAddressSanitizer) {
    // ASan replaces glibc's malloc, so the policy cannot take effect: it must say so
    // rather than claim it is on, and the heap checks below do not apply.
    CHECK_FALSE(policy.kept);
    WARN("SKIPPED: under AddressSanitizer's allocator glibc's malloc policy cannot take effect (" << policy.reason
                                                                                                 << ")");
    return;
  }
  REQUIRE(policy.kept);  // fails under PRISM_MALLOC=system or a GLIBC_TUNABLES malloc setting, by design
  CHECK(&prism::keep_freed_host_memory() == &policy);  // applied once
  // Three 30 MiB blocks, as a step's activations and casts: from the heap, whatever glibc's
  // dynamic threshold had reached (its defaults mmap blocks above 128 KiB until a freed one
  // raises the threshold).
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(std::malloc(size_t{30} << 20));
    REQUIRE(blocks.back() != nullptr);
    static_cast<char*>(blocks.back())[0] = 1;
  }
  const void* top = sbrk(0);
  for (void* b : blocks) CHECK(in_heap(b, top));
  // Freed, their 90 MiB stay at the heap's top: glibc's defaults give back anything above
  // twice the threshold (at most 64 MiB), and the next step faults it in again.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
  CHECK(sbrk(0) == top);
  // The next step's blocks reuse that memory: the break does not move.
  void* again = std::malloc(size_t{30} << 20);
  CHECK(in_heap(again, top));
  CHECK(sbrk(0) == top);
  std::free(again);
  // A block larger than glibc's largest mmap threshold (32 MiB) comes from the heap too:
  // the 124M embedding's casts and gradient are reused like the rest.
  std::vector<void*> big;
  for (int i = 0; i < 2; ++i) big.push_back(std::malloc(size_t{80} << 20));
  for (void* b : big) CHECK(in_heap(b, sbrk(0)));
  const void* big_top = sbrk(0);
  for (auto it = big.rbegin(); it != big.rend(); ++it) std::free(*it);
  CHECK(sbrk(0) == big_top);
}
