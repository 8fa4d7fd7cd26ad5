#include "prism/train/host_memory.h"

#include <cstdlib>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace prism {

namespace {

HostMemoryPolicy apply() {
  HostMemoryPolicy p;
  const char* choice = std::getenv("PRISM_MALLOC");
  if (choice && std::string_view(choice) == "system") {
    p.reason = "PRISM_MALLOC=system: the C library's defaults";
    return p;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) {
    p.reason = "GLIBC_TUNABLES sets glibc.malloc.*: left as given";
    return p;
  }
#if defined(__GLIBC__)
  // No mmap for large blocks (they come from the heap and go back to it), and no
  // trimming of the heap's top (-1: never). mallopt returns 1 on success.
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  p.kept = no_mmap && no_trim;
  p.reason = p.kept ? "glibc malloc: large blocks from the heap, freed memory kept for reuse"
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
