#pragma once
// What every CPU kernel of Prism asks about the machine, whichever op it belongs to
// (attention, LayerNorm, bias + GELU, rotary positions, the LM head's softmax, AdamW):
// is the instruction set PRISM_CPU_ISA names one this CPU runs. The fused attention
// kernel's own code paths are ops/cpu_code_paths.h.
namespace prism {

// PRISM_CPU_ISA holds every Highway kernel to that instruction set or an older one
// (to measure, say, avx2 on an AVX-512 machine). A kernel's binding calls this first:
// it throws prism::Error, naming the variable and the values this CPU runs, for a
// value this build or CPU cannot run; checked once per process once it passes.
void check_cpu_isa_env();

}  // namespace prism
