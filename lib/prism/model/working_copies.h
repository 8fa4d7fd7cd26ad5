#pragma once
// bf16 working copies of a model's fp32 weights, for bf16 training on the CPU.
//
// Under autocast every matmul weight is cast to bf16 in every forward (read
// fp32, write bf16), and its bf16 gradient cast back to fp32 in the backward;
// at 124M those casts were ~5% of a CPU training step. With working copies the
// forward reads a bf16 copy that the optimizer wrote in its own pass over the
// weight (kernels/cpu/adamw.h), and the gradient stays bf16:
//   - a *leaf* copy (the Linear layers' weights) is a bf16 tensor that requires
//     grad: the forward uses it in place of the master, the backward leaves its
//     bf16 gradient on it, and the optimizer reads that gradient;
//   - a *cached* copy (the token embedding tied to the LM head) is only the
//     bf16 operand of the LM head's matmuls: the gradient still goes to the
//     fp32 master, where the embedding's sparse rows are added to it.
// The values are those autocast would compute (the master rounded to the
// nearest bf16), so the arithmetic of a step is autocast's. A copy whose master
// changed by any other way (a checkpoint load, an in-place edit: its version
// counter moved) is cast again before it is used. Copies are used only inside a
// WorkingCopyScope (the training step); evaluation reads the masters.
#include <torch/torch.h>

#include <unordered_map>
#include <vector>

namespace prism {

class WorkingCopies {
 public:
  struct Entry {
    torch::Tensor master;  // the fp32 parameter
    torch::Tensor copy;    // bf16, same shape, contiguous
    bool leaf = false;     // whether the copy collects the gradient
    int64_t version = -1;  // the master's version when the copy was written
  };

  // Adds a copy of `master` (fp32, contiguous, a parameter of the model).
  void add(const torch::Tensor& master, bool leaf);
  // The copy of `master`, written again first if the master changed; nullptr if it has none.
  const Entry* find(const torch::Tensor& master);
  Entry* entry_of(const torch::Tensor& master);
  std::vector<Entry>& entries() { return entries_; }

  // The gradient of `master` for the optimizer and the clipping norm: a leaf
  // copy's bf16 gradient if it has one, else the master's own (fp32, from
  // folded micro-batches, or a cached copy's).
  torch::Tensor grad_of(const torch::Tensor& master) const;
  // Accumulates the leaf copies' bf16 gradients into their masters' fp32
  // gradients and clears them: between micro-batches of gradient accumulation,
  // where bf16 sums would lose precision (the same fp32 sums autocast makes).
  void fold_grads();
  // Clears the leaf copies' gradients (the optimizer's zero_grad clears the masters').
  void zero_grads();
  // After the optimizer wrote a master and its copy outside autograd: bumps the
  // master's version (autograd's check of saved tensors) and records it.
  void written(Entry& e);

 private:
  void refresh(Entry& e);
  std::vector<Entry> entries_;
  std::unordered_map<const void*, size_t> index_;  // master's TensorImpl -> entry
};

// Makes `copies` the ones working_weight and cached_bf16_copy return while
// alive, on this thread (a training step's forward and backward).
class WorkingCopyScope {
 public:
  explicit WorkingCopyScope(WorkingCopies* copies);
  ~WorkingCopyScope();
  WorkingCopyScope(const WorkingCopyScope&) = delete;
  WorkingCopyScope& operator=(const WorkingCopyScope&) = delete;

 private:
  WorkingCopies* previous_;
};

// The weight a matmul should use: the leaf copy of `w` inside a scope that has
// one, else `w` itself.
const torch::Tensor& working_weight(const torch::Tensor& w);
// The cached bf16 copy of `w` inside a scope that has one (either kind), else
// an undefined tensor: for an operand cast to bf16 by hand (the LM head).
torch::Tensor cached_bf16_copy(const torch::Tensor& w);

}  // namespace prism
