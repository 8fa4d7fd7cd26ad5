#pragma once
// Row-wise softmax pieces of the LM head's cross-entropy on the CPU, over logits
// the caller's matmul wrote (one vocabulary chunk, or the whole vocabulary): one
// pass per row where LibTorch's separate ops (max, sub, exp, sum, log, scatter,
// mul) would each stream the logits through memory again. Framework-free: raw
// pointers, row stride `ld` in elements, fp32 or bf16 logits, fp32 statistics.
// Rows are spread over OpenMP threads.
//
// Written once on Google Highway and dispatched at run time to the best target
// this CPU supports (lm_softmax_simd.cpp); the scalar reference (double
// precision) is what tests compare against, and what a build without Highway runs.
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/rows.h"

namespace prism::kernels::cpu {

using LogitType = RowType;
using LogitRows = Rows;  // rows x cols logits

// A row's target column in this chunk is target[r] - offset (the chunk's first
// vocabulary id); none when that lies outside [0, cols) (an ignored target is -1).
struct Targets {
  const int64_t* target = nullptr;
  int64_t offset = 0;
};

// Folds each row's logits into a running log-sum-exp: on entry run_max[r] and
// run_sum[r] hold m and s with lse = m + log(s) over the columns seen so far
// (start from -inf and 0); on return they include this chunk's columns. A row
// whose target lies in this chunk gets its target's logit in target_logit[r]
// (other rows' entries are left as they are).
// With chunk_max given, each logit is also replaced in place by its
// exponential exp(l[r, c] - chunk_max[r]), chunk_max[r] receiving the row's max
// over this chunk: the backward then needs a multiply, not another exp
// (softmax_grad_rows_from_exp); in bf16 the stored exponentials carry a
// relative error of 2^-9 where stored logits would carry |l| 2^-9.
void logsumexp_rows(const LogitRows& logits, float* run_max, float* run_sum, Targets targets, float* target_logit,
                    float* chunk_max = nullptr);

// In place, per row r and column c:
//   l[r, c] <- (exp(l[r, c] - lse[r]) - [c is r's target]) * scale[r],
// the gradient of scale[r] * cross-entropy with respect to the logits.
void softmax_grad_rows(const LogitRows& logits, const float* lse, const float* scale, Targets targets);

// The same gradient from the exponentials logsumexp_rows stored, in place:
//   e[r, c] <- (e[r, c] exp(chunk_max[r] - lse[r]) - [c is r's target]) * scale[r].
void softmax_grad_rows_from_exp(const LogitRows& exps, const float* chunk_max, const float* lse, const float* scale,
                                Targets targets);

// The Highway target the two functions above run on here ("AVX3", "AVX2",
// "NEON", ..., or "scalar reference" in a build without Highway).
const char* lm_softmax_target();

// For tests: the targets compiled in that this CPU runs, best first, and a
// switch that makes the dispatcher use one of them ("" restores the best).
std::vector<std::string> lm_softmax_targets();
void lm_softmax_force_target(const std::string& name);

namespace reference {
void logsumexp_rows(const LogitRows& logits, float* run_max, float* run_sum, Targets targets, float* target_logit,
                    float* chunk_max = nullptr);
void softmax_grad_rows(const LogitRows& logits, const float* lse, const float* scale, Targets targets);
void softmax_grad_rows_from_exp(const LogitRows& exps, const float* chunk_max, const float* lse, const float* scale,
                                Targets targets);
}  // namespace reference

}  // namespace prism::kernels::cpu
