#pragma once
// bf16 working copies of a model's fp32 weights, for bf16 training on the CPU.
//
// Under autocast every matmul weight is cast to bf16 in every forward (read
// fp32, write bf16), and its bf16 gradient cast back to fp32 in the backward;
// at 124M those casts were ~5% of a CPU training step. With working copies each
// matmul weight (the Linear layers' and the token embedding the LM head reads)
// has a bf16 copy that requires grad: the forward's matmuls read it in place of
// the master, the backward leaves their bf16 gradient on it, and the optimizer
// reads that gradient and writes the next copy in its own pass over the weight
// (prism/ops/adamw.h). The token embedding's lookup still reads the fp32
// master, whose sparse gradient (the batch's rows) is added to the copy's
// dense one by the optimizer. The copies' values are those autocast would
// compute (the master rounded to the nearest bf16), so a step's arithmetic is
// autocast's. A copy whose master changed by any other way (a checkpoint load,
// an in-place edit: its version counter moved) is written again before it is
// used. Copies are used only by a forward that is handed them
// (ForwardOptions::working_copies: the training step); evaluation reads the masters.
#include <torch/torch.h>

#include <optional>
#include <unordered_map>
#include <vector>

namespace prism {

class WorkingCopies {
 public:
  // A gradient as the optimizer and the clipping norm read it: a dense part,
  // plus fp32 rows to add to some of its rows (the embedding's sparse gradient).
  struct StepGrad {
    torch::Tensor dense;             // bf16 (the copy's) or fp32 (folded into the master's); undefined: none
    torch::Tensor row_values;        // fp32 (k, cols): the rows to add, or undefined
    std::vector<const float*> rows;  // per row of `dense`: its values in row_values, or null; empty: none
  };
  struct Entry {
    torch::Tensor master;  // the fp32 parameter
    torch::Tensor copy;    // bf16, same shape, contiguous, requires grad
    int64_t version = -1;  // the master's version when the copy was written
    bool master_read = false;  // the forward reads the master too (the token embedding's lookup)
    std::optional<StepGrad> grad;  // this step's, once asked for
  };

  // Adds a copy of `master` (a contiguous fp32 CPU parameter of the model, 2-D);
  // `master_read`: the forward also reads the master itself, which then gets a
  // gradient of its own (data parallelism waits for both).
  void add(const torch::Tensor& master, bool master_read = false);
  // The copy of `master`, written again first if the master changed; nullptr if it has none.
  const Entry* find(const torch::Tensor& master);
  Entry* entry_of(const torch::Tensor& master);
  std::vector<Entry>& entries() { return entries_; }
  const std::vector<Entry>& entries() const { return entries_; }

  // The gradient of an entry's master for this step: the copy's bf16 gradient
  // with the master's sparse rows, or, after fold_grads, the master's fp32 one.
  const StepGrad& step_grad(Entry& e);
  // Accumulates the copies' bf16 gradients into their masters' fp32 gradients
  // and clears them: between micro-batches of gradient accumulation, where bf16
  // sums would lose precision (the same fp32 sums autocast makes).
  void fold_grads();
  // Clears the copies' gradients and the step's (the optimizer's zero_grad clears the masters').
  void zero_grads();
  // After the optimizer wrote a master and its copy outside autograd: bumps both
  // versions (autograd's check of saved tensors) and records the master's.
  void written(Entry& e);

 private:
  void refresh(Entry& e);
  std::vector<Entry> entries_;
  std::unordered_map<const void*, size_t> index_;  // master's TensorImpl -> entry
};

// The weight a matmul should use: the working copy of `w` when `copies` has one
// (a training step passes its copies in ForwardOptions::working_copies), else `w`.
const torch::Tensor& working_weight(WorkingCopies* copies, const torch::Tensor& w);

}  // namespace prism
