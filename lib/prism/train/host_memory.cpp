#include "prism/train/host_memory.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define PRISM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PRISM_ASAN 1
#endif
#endif

namespace prism {

const char* const kKeepFreedHostMemoryTunables =
    "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=18446744073709551615";

namespace {

HostMemoryPolicy apply() {
  HostMemoryPolicy p;
  const char* choice = std::getenv("PRISM_MALLOC");
  if (choice && std::string_view(choice) == "system") {
    p.reason = "PRISM_MALLOC=system: the C library's defaults";
    return p;
  }
  if (choice && *choice && std::string_view(choice) != "keep")
    std::fprintf(stderr, "prism: warning: PRISM_MALLOC=%s is neither system nor keep; keeping freed memory (keep)\n",
                 choice);
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) {
    p.reason = "GLIBC_TUNABLES sets glibc.malloc.*: left as given";
    return p;
  }
#if defined(PRISM_ASAN)
  p.reason = "AddressSanitizer's allocator replaces the C library's malloc: its defaults";
#elif defined(__GLIBC__)
  // Every block comes from the heap (no mmap: 0 mmapped blocks at most), and the heap's
  // top is never trimmed (-1: never). mallopt returns 1 on success. Keep
  // kKeepFreedHostMemoryTunables (above) the same setting.
  const bool heap_blocks = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  p.kept = heap_blocks && no_trim;
  p.reason = p.kept ? "glibc malloc: every block from the heap, freed memory kept for reuse"
                    : "glibc refused mallopt: the C library's defaults";
#else
  p.reason = "not glibc: the C library's defaults";
#endif
  return p;
}

}  // namespace

const HostMemoryPolicy& keep_freed_host_memory() {
  static const HostMemoryPolicy policy = apply();
  return policy;
}

}  // namespace prism
