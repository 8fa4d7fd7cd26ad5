#pragma once
// Rotary position embedding (RoPE) of attention queries and keys, in Hugging
// Face Llama's convention (`rotate_half`): in a head of width D, element c < D/2
// pairs with c + D/2 and the pair at position t turns by t theta^(-2c/D). Each
// layer rotates at its own head width, so a Prism layer of 128-wide heads turns
// 64 frequency pairs where a 32-wide one turns 16.
//
// On the CPU, in fp32 and bf16 (autocast included), one kernel pass
// (kernels/cpu/rope.h) rotates q and k where they lie in the fused qkv
// projection's output and writes them contiguous; the backward is one pass that
// turns the gradients back (it needs the angles only, so nothing of q or k is
// saved). Elsewhere (CUDA, fp64, fp16) it is LibTorch's ops, as Hugging Face
// writes it: x cos + rotate_half(x) sin, with cos and sin in x's dtype.
#include <torch/torch.h>

namespace prism {

// cos and sin of t theta^(-2c/D) for positions t < T and pairs c < D/2: (T, D/2)
// float32 each on `device`, computed in double and rounded once.
struct RopeTable {
  torch::Tensor cos, sin;
  int64_t positions() const { return cos.size(0); }
  int64_t head_dim() const { return 2 * cos.size(1); }
};
RopeTable rope_table(int64_t T, int64_t head_dim, double theta, const torch::Device& device = torch::kCPU);

struct RotatedQK {
  torch::Tensor q, k;  // (B, T, H, D)
};

// q, k: (B, T, H, D) with the same shape, dtype and device; any strides (views of
// a fused qkv projection are read in place). table: for at least T positions and
// head width D. Throws prism::Error when the shapes do not fit the table.
RotatedQK apply_rope(const torch::Tensor& q, const torch::Tensor& k, const RopeTable& table);

// The rotation by plain LibTorch ops (the path off the CPU kernel; tests' ground truth).
torch::Tensor rope_by_ops(const torch::Tensor& x, const RopeTable& table);

// Whether apply_rope runs the CPU kernel on these tensors (CPU, fp32 or bf16).
bool fused_rope_fits(const torch::Tensor& q, const torch::Tensor& k);

// The Highway target the kernel runs on here ("AVX3_SPR", "AVX2", ...).
const char* rope_cpu_target();

}  // namespace prism
