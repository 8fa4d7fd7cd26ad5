#pragma once
// The LM head and its cross-entropy: mean over tokens of
// -log softmax(x W^T)[target], by one of two paths chosen per device:
//   chunked  one pass per row over the logits for the softmax statistics and
//            one for their gradient (kernels/cpu/lm_softmax.h on the CPU),
//            where separate LibTorch ops would stream N x V floats ~7 times
//            forward and ~9 backward. Logits are made one vocabulary chunk at a
//            time (a matmul into a cache-sized block runs ~2x faster than one
//            writing all N x V). They are kept for the backward while they
//            fit keep_logits_bytes, in a CPU buffer reused across steps
//            (saving a third of the LM head's matmul work); beyond that the
//            backward recomputes each chunk.
//   plain    linear + cross_entropy, as nanoGPT writes it. On a GPU the whole
//            (N x V) logits fit (1.6 GB in bf16 at 16 x 1024 tokens), and two
//            large matmuls plus the fused softmax kernels beat the chunk loop,
//            which makes ~7 passes over N x 2048 fp32 per chunk forward and ~9
//            backward, each a separate small kernel.
// The default (LmLossPath::Auto) is plain on CUDA and chunked elsewhere;
// `prism-device-bench loss` times both on a GPU (scripts/device-check.sh).
#include <torch/torch.h>

namespace prism {

enum class LmLossPath { Auto, Chunked, Plain };

// What Auto resolves to for tensors on `device`.
LmLossPath lm_loss_path_for(const torch::Device& device);
const char* lm_loss_path_name(LmLossPath path);

// The loss by `path` (Auto: lm_loss_path_for(x.device())). Same contract as
// lm_head_cross_entropy below; both paths agree to rounding (tested).
torch::Tensor lm_head_loss(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                           LmLossPath path = LmLossPath::Auto);

// x: (N, d) hidden states after the final LayerNorm; weight: (V, d) (the tied
// token embedding); targets: (N) int64, entries < 0 ignored. Returns the mean
// loss over the counted tokens (fp32 scalar). Under CPU/CUDA autocast the
// matmuls run in bf16 with fp32 softmax statistics, like autocast's linear +
// cross_entropy; gradients flow to x and weight.
// The chunked path. keep_logits_bytes: the most memory the kept logits (N x V
// in the matmul dtype) may take; 0 always recomputes chunks. Without a backward
// to come (no grad mode, or no input that requires grad) nothing is kept.
inline constexpr int64_t kLmKeepLogitsBytes = int64_t{512} << 20;
torch::Tensor lm_head_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                                    int64_t vocab_chunk = 2048, int64_t keep_logits_bytes = kLmKeepLogitsBytes);

// The plain path: F::linear (bf16 under autocast) then cross_entropy in fp32.
torch::Tensor lm_head_plain_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight,
                                          const torch::Tensor& targets);

// Each token's cross-entropy, (N) fp32: -log softmax(x W^T)[target], 0 where the
// target is ignored (< 0). Logits are made `max_logit_bytes` at a time (rows x V in
// fp32), never all N x V; under autocast the matmul runs in bf16 and the softmax in
// fp32, as in the paths above. Differentiable (plain LibTorch ops).
torch::Tensor lm_head_token_losses(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                                   int64_t max_logit_bytes = int64_t{64} << 20);

}  // namespace prism
