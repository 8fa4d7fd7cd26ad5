#pragma once
// A residual add and the LayerNorm after it, on the CPU, forward and backward, one
// pass over each row each way (the row stays in L1 between its reads):
//
//   h = x + r                     (the residual stream plus a block's output; h = x without r)
//   y = (h - mean) * rstd * gamma + beta,   mean, var over the row, rstd = 1 / sqrt(var + eps)
//
// where LibTorch spends, under autocast, an add, a LayerNorm and a cast to bf16 for the
// next matmul forward, and in the backward the cast's widening, the LayerNorm's
// gradient, the add of the residual gradient and a narrowing cast for the branch.
// Framework-free: raw pointers, row stride `ld` in elements. The residual stream
// (x, h, the gradients dh and dx) is fp32; r, y, dy and dr are fp32 or bf16; gamma,
// beta and all arithmetic fp32 (the variance is the biased one, over the centred
// values, as ATen's). Rows are spread over OpenMP threads.
//
// Written once on Google Highway and dispatched at run time to the best target
// this CPU supports (layer_norm_simd.cpp); the scalar reference (double precision)
// is what tests compare against, and what a build without Highway runs.
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/rows.h"

namespace prism::kernels::cpu {

// Forward. r null: no add (h = x, and h may be null); with r, h is required and
// receives x + r (fp32). y: the normalised rows; mean and rstd: one value per row, for the
// backward. beta null: no shift.
void add_layer_norm_forward(const Rows& x, const Rows* r, const Rows* h, const float* gamma, const float* beta,
                            float eps, const Rows& y, float* mean, float* rstd);

// Backward, with xhat = (h - mean) rstd and g = dy gamma:
//   dx = rstd (g - mean_c(g) - xhat mean_c(g xhat)) + dh        (dh null: no residual gradient)
// dr, when given, receives dx rounded to its type. dgamma[c] = sum over rows of
// dy xhat and dbeta[c] = sum of dy (either may be null), summed in fp32 by blocks
// of rows in order, so the sums are the same bits on any number of threads.
void add_layer_norm_backward(const Rows& dy, const Rows* dh, const Rows& h, const float* mean, const float* rstd,
                             const float* gamma, const Rows& dx, const Rows* dr, float* dgamma, float* dbeta);

// The Highway target the two functions above run on here ("AVX3_ZEN4", "AVX2",
// ..., or "scalar reference" in a build without Highway).
const char* layer_norm_target();

// For tests: the targets compiled in that this CPU runs, best first, and a
// switch that makes the dispatcher use one of them ("" restores the best).
std::vector<std::string> layer_norm_targets();
void layer_norm_force_target(const std::string& name);

namespace reference {
void add_layer_norm_forward(const Rows& x, const Rows* r, const Rows* h, const float* gamma, const float* beta,
                            float eps, const Rows& y, float* mean, float* rstd);
void add_layer_norm_backward(const Rows& dy, const Rows* dh, const Rows& h, const float* mean, const float* rstd,
                             const float* gamma, const Rows& dx, const Rows* dr, float* dgamma, float* dbeta);
}  // namespace reference

}  // namespace prism::kernels::cpu
