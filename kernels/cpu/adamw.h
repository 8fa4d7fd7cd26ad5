#pragma once
// One AdamW step over a tensor's elements, for fp32 master weights trained
// through bf16 working copies (lib/prism/train/optimizer.h): reads the gradient
// as bf16 (the working copy's own gradient) or fp32, updates the master weight
// and both moments in place, and writes the next step's bf16 copy of the
// weight in the same pass. Where the copy would otherwise be made by casting
// every weight in the forward, and every bf16 gradient cast back to fp32 in the
// backward, this reads and writes each element once.
//
// The update is ATen's fused AdamW (_fused_adamw_, decoupled weight decay), in
// fp32 arithmetic:
//   g  = grad / grad_scale
//   p -= lr * weight_decay * p
//   m += (1 - beta1) (g - m)
//   v  = beta2 v + (1 - beta2) g^2
//   p -= (lr / (1 - beta1^step)) m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//   copy = bf16(p), rounded to the nearest even
// Framework-free: raw pointers, contiguous. Elements are spread over OpenMP
// threads; each element's result does not depend on the thread count.
//
// Written once on Google Highway and dispatched at run time (adamw_simd.cpp);
// the scalar reference is what tests compare against, and what a build without
// Highway runs.
#include <cstdint>
#include <string>
#include <vector>

namespace prism::kernels::cpu {

struct AdamWHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;         // this step's count, already incremented (>= 1)
  double grad_scale = 1.0;  // the gradient is divided by it (clipping)
};

// fp32 rows added to some rows of a gradient: the token embedding's sparse
// gradient (the batch's rows) on top of the tied LM head's dense bf16 one. The
// tensor is (n / cols) rows of `cols` values; rows[r] is row r's fp32 values
// to add, or null.
struct ExtraRows {
  int64_t cols = 0;
  const float* const* rows = nullptr;  // null: none
};

struct AdamWTensor {
  float* param = nullptr;            // fp32 master weight, updated in place
  const float* grad_f32 = nullptr;   // the gradient: exactly one of grad_f32 and
  const uint16_t* grad_bf16 = nullptr;  // grad_bf16 is given
  ExtraRows extra;                   // added to the gradient (before grad_scale divides it)
  float* exp_avg = nullptr;          // first moment, in place
  float* exp_avg_sq = nullptr;       // second moment, in place
  uint16_t* copy_bf16 = nullptr;     // the bf16 working copy written from the new weight; may be null
  int64_t n = 0;
};

void adamw_step(const AdamWTensor& t, const AdamWHyper& h);

// The sum of the squares of n bf16 values plus their extra rows (a bf16
// gradient's share of the clipping norm): fp32 lanes over fixed blocks of at
// most 256 values whose sums are added in order in double, so the same bits
// on any thread count.
double sum_squares_bf16(const uint16_t* x, int64_t n, const ExtraRows& extra = {});

// The Highway target adamw_step runs on here ("AVX3_ZEN4", ..., or "scalar
// reference" in a build without Highway); for tests, the targets this CPU
// runs and a switch to one of them ("" restores the best).
const char* adamw_target();
std::vector<std::string> adamw_targets();
void adamw_force_target(const std::string& name);

namespace reference {
void adamw_step(const AdamWTensor& t, const AdamWHyper& h);
double sum_squares_bf16(const uint16_t* x, int64_t n, const ExtraRows& extra = {});  // in double
}  // namespace reference

}  // namespace prism::kernels::cpu
