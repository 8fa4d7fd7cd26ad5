#pragma once
// How the process's C allocator keeps memory that LibTorch frees.
//
// glibc serves a block above its mmap threshold (128 KiB at first, raised up to
// 32 MiB as such blocks are freed) with a fresh mmap and unmaps it when freed, and
// returns memory freed at the top of its heap to the kernel once more than twice
// that threshold is free. A training step frees and allocates the same tensors
// every step (activations, bf16 casts of the weights, gradients: hundreds of MiB
// at 124M), so each step page-faulted much of that memory in again. At 124M bf16
// (2-thread Zen 5) the step's copies/casts took 142 ms with glibc's defaults, 122
// ms with the threshold fixed at 32 MiB and no trimming (the embedding-sized
// blocks still mmapped), and 80 ms with every block from the heap and no trimming,
// which keep_freed_host_memory() sets. The cost is the heap's fragmentation: the
// resident size settles a little above the run's peak (+2.5% to +7% at 124M, the
// same at cpu-128 over 300 steps; a synthetic pattern of five 40-96 MiB blocks
// settled at 1.9x to 3.6x its bytes). `prism sweep` runs each trial in its own
// process, so a heap never outlives its run.
#include <string>

namespace prism {

struct HostMemoryPolicy {
  bool kept = false;    // freed memory is kept for reuse (the setting above is in effect)
  std::string reason;   // why not, or what was set
};

// Applies the setting (on the first call; later calls return the same answer),
// unless PRISM_MALLOC=system asks for the C library's defaults (keep, the
// default, or unset applies it; another value is warned about on stderr), GLIBC_TUNABLES
// already sets glibc.malloc.* (the user's choice wins), or the C library is not
// glibc. Returns what is in effect. `prism` calls it first thing in main().
const HostMemoryPolicy& keep_freed_host_memory();

// The same setting as glibc tunables (GLIBC_TUNABLES=...), for a process that is not
// Prism: `prism bench train --reference-malloc prism` runs the PyTorch reference with it.
// mmap_max=0 is M_MMAP_MAX 0; trim_threshold=SIZE_MAX is M_TRIM_THRESHOLD -1 (never).
extern const char* const kKeepFreedHostMemoryTunables;

}  // namespace prism
