// Forward instances for head dim 96: bf16 and fp16 on the tensor cores, fp32 on the CUDA cores.
#include "cuda/forward_mma.cuh"
#include "cuda/launch.h"
#include "cuda/simt_fp32.cuh"

namespace prism::kernels::cuda {
template void launch_forward_mma<__nv_bfloat16, 96>(const AttentionForwardParams&);
template void launch_forward_mma<__half, 96>(const AttentionForwardParams&);
template void launch_forward_simt<96>(const AttentionForwardParams&);
}  // namespace prism::kernels::cuda
