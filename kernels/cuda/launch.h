#pragma once
// Launchers of every kernel instance; defined (explicitly instantiated) in the
// instances/*.cu files, one per head dim and direction, so they compile in parallel.
#include "common/attention_params.h"

namespace prism::kernels::cuda {

template <typename T, int D> void launch_forward_mma(const AttentionForwardParams& p);
template <typename T, int D> void launch_backward_mma(const AttentionBackwardParams& p);
template <int D> void launch_forward_simt(const AttentionForwardParams& p);
template <int D> void launch_backward_simt(const AttentionBackwardParams& p);

}  // namespace prism::kernels::cuda
