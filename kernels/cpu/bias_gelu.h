#pragma once
// The MLP's bias + GELU (GPT-2's tanh form) on the CPU, forward and backward, over
// the output of a bias-free matmul: one pass each way where LibTorch spends three
// (the bias copied into the output before the matmul accumulates onto it, the
// GELU, and in the backward the GELU's gradient and then the bias gradient's sum
// over rows). Framework-free: raw pointers, row stride `ld` in elements, fp32 or
// bf16 activations, fp32 bias and arithmetic. Rows are spread over OpenMP threads.
//
//   gelu(h)  = h/2 (1 + tanh(u)),  u = sqrt(2/pi) (h + 0.044715 h^3)
//   gelu'(h) = (1 + tanh(u))/2 + h/2 (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 h^2)
//
// Written once on Google Highway and dispatched at run time to the best target
// this CPU supports (bias_gelu_simd.cpp); the scalar reference (double precision)
// is what tests compare against, and what a build without Highway runs.
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/rows.h"

namespace prism::kernels::cpu {

// y[r, c] = gelu(x[r, c] + bias[c]); no bias when bias is null. x and y have the
// same type and shape; y may be x (in place).
void bias_gelu_forward(const Rows& x, const float* bias, const Rows& y);

// dx[r, c] = dy[r, c] gelu'(x[r, c] + bias[c]), and with dbias given,
// dbias[c] = sum over r of dx[r, c], summed in fp32 before dx is rounded to its
// type, in an order that does not depend on the number of threads (blocks of
// rows in order), so a run resumes bit for bit on another thread count. dx may be
// dy (in place). dy, x and dx have the same type and shape.
void bias_gelu_backward(const Rows& dy, const Rows& x, const float* bias, const Rows& dx, float* dbias);

// The Highway target the two functions above run on here ("AVX3_ZEN4", "AVX2",
// "NEON", ..., or "scalar reference" in a build without Highway).
const char* bias_gelu_target();

// For tests: the targets compiled in that this CPU runs, best first, and a
// switch that makes the dispatcher use one of them ("" restores the best).
std::vector<std::string> bias_gelu_targets();
void bias_gelu_force_target(const std::string& name);

namespace reference {
void bias_gelu_forward(const Rows& x, const float* bias, const Rows& y);
void bias_gelu_backward(const Rows& dy, const Rows& x, const float* bias, const Rows& dx, float* dbias);
}  // namespace reference

}  // namespace prism::kernels::cpu
