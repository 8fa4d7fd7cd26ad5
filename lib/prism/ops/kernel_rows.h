#pragma once
// A contiguous (..., cols) CPU tensor of fp32 or bf16 values as the row kernels'
// matrix (kernels/cpu/rows.h): numel / cols rows, no gap between them.
#include <torch/torch.h>

#include "cpu/rows.h"

namespace prism {

inline kernels::cpu::Rows contiguous_rows(const torch::Tensor& t) {
  kernels::cpu::Rows a;
  a.data = t.data_ptr();
  a.type = t.scalar_type() == torch::kFloat ? kernels::cpu::RowType::F32 : kernels::cpu::RowType::BF16;
  a.cols = t.size(-1);
  a.rows = a.cols == 0 ? 0 : t.numel() / a.cols;
  a.ld = a.cols;
  return a;
}

}  // namespace prism
