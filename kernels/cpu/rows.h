#pragma once
// A matrix of fp32 or bf16 values by rows, as the row-wise CPU kernels take it
// (lm_softmax.h, bias_gelu.h), and the scalar references' element access (in
// double precision; a stored value rounds to the matrix's type).
#include <cstdint>

#include "cpu/bf16.h"

namespace prism::kernels::cpu {

enum class RowType { F32, BF16 };

struct Rows {
  void* data = nullptr;  // rows x cols values, row r at data + r * ld elements
  RowType type = RowType::F32;
  int64_t rows = 0, cols = 0, ld = 0;
};

namespace reference {

inline double load(const Rows& m, int64_t r, int64_t c) {
  const int64_t i = r * m.ld + c;
  if (m.type == RowType::F32) return static_cast<const float*>(m.data)[i];
  return bf16_to_float(static_cast<const uint16_t*>(m.data)[i]);
}

inline void store(const Rows& m, int64_t r, int64_t c, double v) {
  const int64_t i = r * m.ld + c;
  const float f = static_cast<float>(v);
  if (m.type == RowType::F32) static_cast<float*>(m.data)[i] = f;
  else static_cast<uint16_t*>(m.data)[i] = float_to_bf16(f);
}

}  // namespace reference
}  // namespace prism::kernels::cpu
