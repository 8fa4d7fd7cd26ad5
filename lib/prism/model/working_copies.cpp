#include "prism/model/working_copies.h"

#include "prism/error.h"

namespace prism {

void WorkingCopies::add(const torch::Tensor& master, bool master_read) {
  if (master.scalar_type() != torch::kFloat || !master.is_contiguous() || !master.device().is_cpu() ||
      master.dim() != 2)
    throw Error("a bf16 working copy needs a contiguous 2-D fp32 CPU master weight", "working copies",
                "train in fp32, or keep the weight on the CPU in fp32");
  if (index_.count(master.unsafeGetTensorImpl())) return;
  Entry e;
  e.master = master;
  e.master_read = master_read;
  e.copy = torch::empty_like(master, master.options().dtype(torch::kBFloat16));
  e.copy.set_requires_grad(true);
  refresh(e);
  index_[master.unsafeGetTensorImpl()] = entries_.size();
  entries_.push_back(std::move(e));
}

void WorkingCopies::refresh(Entry& e) {
  torch::NoGradGuard no_grad;
  e.copy.copy_(e.master);  // round to the nearest even, as autocast's cast
  e.version = static_cast<int64_t>(e.master._version());
}

WorkingCopies::Entry* WorkingCopies::entry_of(const torch::Tensor& master) {
  auto it = index_.find(master.unsafeGetTensorImpl());
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const WorkingCopies::Entry* WorkingCopies::find(const torch::Tensor& master) {
  Entry* e = entry_of(master);
  if (e && static_cast<int64_t>(e->master._version()) != e->version) refresh(*e);
  return e;
}

const WorkingCopies::StepGrad& WorkingCopies::step_grad(Entry& e) {
  if (e.grad) return *e.grad;
  torch::NoGradGuard no_grad;
  StepGrad g;
  const torch::Tensor own = e.copy.grad(), master = e.master.grad();
  if (own.defined() && master.defined() && master.is_sparse()) {
    // The copy's dense bf16 gradient, and the master's rows (summed per row) to add to it.
    const auto sparse = master.coalesce();
    g.dense = own.contiguous();
    g.row_values = sparse.values().to(torch::kFloat).contiguous();
    const auto index = sparse.indices()[0].contiguous();
    const int64_t* r = index.data_ptr<int64_t>();
    g.rows.assign(static_cast<size_t>(g.dense.size(0)), nullptr);
    for (int64_t i = 0; i < index.numel(); ++i)
      g.rows[static_cast<size_t>(r[i])] = g.row_values.data_ptr<float>() + i * g.row_values.size(1);
  } else if (own.defined() && master.defined()) {
    g.dense = (master + own.to(torch::kFloat)).contiguous();
  } else if (own.defined()) {
    g.dense = own.contiguous();
  } else if (master.defined()) {
    g.dense = (master.is_sparse() ? master.to_dense() : master).contiguous();
  }
  e.grad = std::move(g);
  return *e.grad;
}

void WorkingCopies::fold_grads() {
  torch::NoGradGuard no_grad;
  for (auto& e : entries_) {
    if (!e.copy.grad().defined()) continue;
    auto g = e.copy.grad().to(torch::kFloat);
    auto& master = e.master.mutable_grad();
    if (!master.defined()) master = g;
    else if (master.is_sparse()) master = g.add_(master);
    else master.add_(g);
    e.copy.mutable_grad() = torch::Tensor();
  }
}

void WorkingCopies::zero_grads() {
  for (auto& e : entries_) {
    e.copy.mutable_grad() = torch::Tensor();
    e.grad.reset();
  }
}

void WorkingCopies::written(Entry& e) {
  e.master.unsafeGetTensorImpl()->bump_version();
  e.copy.unsafeGetTensorImpl()->bump_version();
  e.version = static_cast<int64_t>(e.master._version());
}

const torch::Tensor& working_weight(WorkingCopies* copies, const torch::Tensor& w) {
  if (!copies) return w;
  const auto* e = copies->find(w);
  return e ? e->copy : w;
}

}  // namespace prism
