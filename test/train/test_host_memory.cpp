// Prism's host memory policy (lib/prism/train/host_memory.h): large blocks that
// LibTorch frees are kept for the next allocation instead of being unmapped and
// page-faulted in again every step.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>

#include "prism/train/host_memory.h"

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Minor page faults taken by allocating and writing a fresh `bytes`-byte tensor.
long faults_of_fresh_tensor(int64_t bytes) {
  const long before = minor_faults();
  auto t = torch::empty({bytes}, torch::kByte);
  t.fill_(1);
  const long after = minor_faults();
  CHECK(t[bytes - 1].item<int>() == 1);
  return after - before;
}

}  // namespace

TEST_CASE("with Prism's host memory policy freed 96 MiB blocks are reused without page faults", "[train][memory]") {
  const auto& policy = prism::keep_freed_host_memory();
  INFO("policy: " << policy.reason);
#if defined(__SANITIZE_ADDRESS__)
  // ASan owns malloc and refuses mallopt: the policy says so rather than claiming it is on.
  CHECK_FALSE(policy.kept);
#else
  REQUIRE(policy.kept);  // fails under PRISM_MALLOC=system or a GLIBC_TUNABLES malloc setting, by design
  CHECK(&prism::keep_freed_host_memory() == &policy);  // applied once
  const int64_t bytes = int64_t{96} << 20;  // above glibc's largest mmap threshold (32 MiB)
  // The first touches new pages (96 MiB / 4 KiB = 24576, fewer with huge pages); later ones
  // reuse freed ones (one of the next few at least: an aligned request is a little larger than
  // the block freed before it, which glibc then keeps beside the next). With glibc's defaults
  // every one would be a fresh mapping and fault every page, as a training step's tensors did.
  const long first = faults_of_fresh_tensor(bytes);
  long fewest = first;
  for (int i = 0; i < 3; ++i) fewest = std::min(fewest, faults_of_fresh_tensor(bytes));
  INFO("minor page faults: first " << first << ", fewest of the next three " << fewest);
  CHECK(fewest * 20 < first + 20);
#endif
}
