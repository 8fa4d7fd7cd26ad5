// The fused attention kernel compiled for one instruction set (avx512bf16); the
// compile flags are set per file in kernels/CMakeLists.txt.
#define PRISM_ISA_NS avx512bf16
#include "cpu/attention_impl.h"
