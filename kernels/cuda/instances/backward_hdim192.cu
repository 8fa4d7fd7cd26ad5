// Backward instances for head dim 192: bf16 and fp16 on the tensor cores, fp32 on the CUDA cores.
#include "cuda/backward_mma.cuh"
#include "cuda/launch.h"
#include "cuda/simt_fp32.cuh"

namespace prism::kernels::cuda {
template void launch_backward_mma<__nv_bfloat16, 192>(const AttentionBackwardParams&);
template void launch_backward_mma<__half, 192>(const AttentionBackwardParams&);
template void launch_backward_simt<192>(const AttentionBackwardParams&);
}  // namespace prism::kernels::cuda
