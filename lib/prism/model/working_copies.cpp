#include "prism/model/working_copies.h"

#include "prism/error.h"

namespace prism {

namespace {
thread_local WorkingCopies* active = nullptr;
}  // namespace

void WorkingCopies::add(const torch::Tensor& master, bool leaf) {
  if (master.scalar_type() != torch::kFloat || !master.is_contiguous() || !master.device().is_cpu())
    throw Error("a bf16 working copy needs a contiguous fp32 CPU master weight", "working copies",
                "train in fp32, or keep the weight on the CPU in fp32");
  if (index_.count(master.unsafeGetTensorImpl())) return;
  Entry e;
  e.master = master;
  e.leaf = leaf;
  e.copy = torch::empty_like(master, master.options().dtype(torch::kBFloat16));
  if (leaf) e.copy.set_requires_grad(true);
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

torch::Tensor WorkingCopies::grad_of(const torch::Tensor& master) const {
  auto it = index_.find(master.unsafeGetTensorImpl());
  if (it != index_.end()) {
    const Entry& e = entries_[it->second];
    if (e.leaf && e.copy.grad().defined()) return e.copy.grad();
  }
  return master.grad();
}

void WorkingCopies::fold_grads() {
  torch::NoGradGuard no_grad;
  for (auto& e : entries_) {
    if (!e.leaf || !e.copy.grad().defined()) continue;
    auto g = e.copy.grad().to(torch::kFloat);
    if (e.master.grad().defined()) e.master.mutable_grad().add_(g);
    else e.master.mutable_grad() = g;
    e.copy.mutable_grad() = torch::Tensor();
  }
}

void WorkingCopies::zero_grads() {
  for (auto& e : entries_)
    if (e.leaf) e.copy.mutable_grad() = torch::Tensor();
}

void WorkingCopies::written(Entry& e) {
  e.master.unsafeGetTensorImpl()->bump_version();
  e.copy.unsafeGetTensorImpl()->bump_version();
  e.version = static_cast<int64_t>(e.master._version());
}

WorkingCopyScope::WorkingCopyScope(WorkingCopies* copies) : previous_(active) { active = copies; }
WorkingCopyScope::~WorkingCopyScope() { active = previous_; }

const torch::Tensor& working_weight(const torch::Tensor& w) {
  if (!active) return w;
  const auto* e = active->find(w);
  return e && e->leaf ? e->copy : w;
}

torch::Tensor cached_bf16_copy(const torch::Tensor& w) {
  if (!active) return {};
  const auto* e = active->find(w);
  return e ? e->copy.detach() : torch::Tensor();
}

}  // namespace prism
