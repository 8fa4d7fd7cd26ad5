// The fused attention kernel compiled for one instruction set (avx512); the
// compile flags are set per file in kernels/CMakeLists.txt.
#define PRISM_ISA_NS avx512
#include "cpu/attention_impl.h"
