#pragma once
// Rotary position embedding (RoPE) of attention queries and keys on the CPU, in
// Hugging Face Llama's convention (`rotate_half`): within a head of width D,
// element c < D/2 pairs with element c + D/2, and the pair at position t turns by
// the angle t w_c, w_c = theta^(-2c/D):
//
//   y[c]       = x[c] cos(t w_c) - x[c + D/2] sin(t w_c)
//   y[c + D/2] = x[c + D/2] cos(t w_c) + x[c] sin(t w_c)
//
// The backward is the rotation by -t w_c (a rotation's transpose). The angles'
// cosines and sines come as a table the caller makes once per head width and
// call (the binding makes it in double precision).
//
// Framework-free: raw pointers and strides. The values are (B, T, H, D), fp32 or
// bf16, any B, T, H strides and unit stride along D, so the q and k views of a
// fused qkv projection are read where they are; arithmetic is fp32, each result
// rounded once to its type. Up to two tensors (q and k) go through one call; rows
// (tensor, b, t) are spread over OpenMP threads. Written once on Google Highway
// and dispatched at run time to the best target this CPU supports (rope_simd.cpp);
// the scalar reference (double precision) is what tests compare against, and
// what a build without Highway runs.
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/rows.h"

namespace prism::kernels::cpu {

// A (B, T, H, D) tensor with unit stride along D; strides in elements.
struct RopeView {
  void* data = nullptr;
  int64_t stride_b = 0, stride_t = 0, stride_h = 0;
};

struct RopeParams {
  RowType type = RowType::F32;  // of every x and y
  int64_t B = 0, T = 0, H = 0, D = 0;  // D even
  const float* cos = nullptr;  // (T, D/2): cos(t w_c) at t * D/2 + c
  const float* sin = nullptr;  // (T, D/2)
  int tensors = 0;             // 1 or 2 pairs below
  RopeView x[2], y[2];         // y[i] = rotate(x[i]); y[i] may be x[i] (in place), never overlap otherwise
  bool inverse = false;        // rotate by -t w_c (the backward: x is the output's gradient)
};

void rope_apply(const RopeParams& p);

// The Highway target rope_apply runs on here ("AVX3_SPR", "AVX2", ..., or
// "scalar reference" in a build without Highway).
const char* rope_target();

// For tests: the targets compiled in that this CPU runs, best first, and a
// switch that makes the dispatcher use one of them ("" restores the best).
std::vector<std::string> rope_targets();
void rope_force_target(const std::string& name);

namespace reference {
void rope_apply(const RopeParams& p);
}  // namespace reference

}  // namespace prism::kernels::cpu
