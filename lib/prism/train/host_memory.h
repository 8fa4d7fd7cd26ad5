#pragma once
// How the process's C allocator keeps memory that LibTorch frees.
//
// glibc serves a block above its mmap threshold (128 KiB at first, raised up to
// 32 MiB as such blocks are freed) with a fresh mmap, and returns memory freed
// at the top of its heap to the kernel once more than twice that threshold is
// free. A training step frees and allocates the same tensors every step (its
// activations, casts and gradients: hundreds of MiB at 124M), so each step
// page-faulted much of that memory in again: 2-3 s of system time per 10 steps
// at 124M bf16 (2-thread Zen 5). keep_freed_host_memory() fixes the threshold at
// 32 MiB and turns trimming off: blocks up to 32 MiB are reused from the heap.
// A larger one (the 124M embedding's casts and gradient) that no free heap block
// fits is still mmapped and unmapped when freed: serving those from the heap
// too (mmap off) was no faster for a whole 124M run and let the heap grow to
// 3.6x a synthetic step's bytes. The resident size stays near the run's peak, which a training
// process reaches every step anyway.
#include <string>

namespace prism {

struct HostMemoryPolicy {
  bool kept = false;    // freed memory is kept for reuse (the setting above is in effect)
  std::string reason;   // why not, or what was set
};

// Applies the setting (on the first call; later calls return the same answer),
// unless PRISM_MALLOC=system asks for the C library's defaults, GLIBC_TUNABLES
// already sets glibc.malloc.* (the user's choice wins), or the C library is not
// glibc. Returns what is in effect. `prism` calls it first thing in main().
const HostMemoryPolicy& keep_freed_host_memory();

}  // namespace prism
