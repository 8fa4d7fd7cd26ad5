// The fused attention kernel compiled for one instruction set (scalar); the
// compile flags are set per file in kernels/CMakeLists.txt.
#define PRISM_ISA_NS scalar
#include "cpu/attention_impl.h"
