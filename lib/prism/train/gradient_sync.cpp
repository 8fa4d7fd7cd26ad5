// GradientSync: averages gradients over the ranks with bucketed all-reduces
// launched from autograd hooks while the backward runs (through ProcessGroup,
// so nothing here depends on c10d).
#include "prism/train/distributed.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "prism/error.h"

namespace prism {

namespace {

struct Bucket {
  std::vector<size_t> params;  // indices into Buckets::params
  torch::Tensor flat;          // the bucket's gradients, contiguous
  size_t pending = 0;          // gradients still to arrive this step
  std::unique_ptr<ProcessGroup::Pending> work;
};

// Where a parameter's gradient arrives: on the parameter, on its bf16 working copy, or both.
enum Source : uint8_t { kParam = 1, kCopy = 2 };

}  // namespace

struct GradientSync::Buckets {
  std::shared_ptr<ProcessGroup> group;
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> copies;  // per parameter: its working copy, or undefined
  std::vector<uint8_t> expect, seen;  // per parameter: the sources to wait for, and those seen this step
  std::vector<bool> gathered;         // per parameter: in its bucket this step
  std::vector<size_t> bucket_of;
  std::vector<int64_t> offset_of;
  std::vector<Bucket> buckets;
  const WorkingCopies* bound = nullptr;
  bool communicate = false;
  size_t next_launch = 0;

  torch::Tensor slot(size_t i) { return buckets[bucket_of[i]].flat.narrow(0, offset_of[i], params[i].numel()); }

  void arrive(size_t i, Source from) {
    if (!communicate || gathered[i] || (seen[i] & from)) return;
    seen[i] |= from;
    if (seen[i] == expect[i]) gather(i);
  }

  // The parameter's gradient into its slot: its own (dense, or the embedding's
  // sparse rows, summed per row first as the optimizer would) plus its copy's
  // bf16 one, in fp32. A parameter without a gradient contributes zeros, so no
  // rank waits forever on its bucket.
  void gather(size_t i) {
    gathered[i] = true;
    torch::NoGradGuard ng;
    auto s = slot(i);
    const torch::Tensor own = params[i].grad(), copy = copies[i].defined() ? copies[i].grad() : torch::Tensor();
    if (own.defined() && !own.is_sparse()) {
      s.copy_(own.reshape(-1));
      if (copy.defined()) s.add_(copy.reshape(-1));
    } else {
      if (copy.defined()) s.copy_(copy.reshape(-1));
      else s.zero_();
      if (own.defined()) s.view_as(params[i]).add_(own.coalesce());
    }
    if (--buckets[bucket_of[i]].pending == 0) launch_ready();
  }

  // Buckets go out strictly in index order, so every rank issues the same sequence.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch++];
      b.flat.div_(group->world_size());
      b.work = group->all_reduce_sum_async(b.flat);
    }
  }
};

namespace {

struct ArriveHook : torch::autograd::PostAccumulateGradHook {
  std::weak_ptr<GradientSync::Buckets> b;
  size_t i;
  Source from;
  ArriveHook(std::weak_ptr<GradientSync::Buckets> b, size_t i, Source from) : b(std::move(b)), i(i), from(from) {}
  void operator()(const torch::autograd::Variable&) override {
    if (auto s = b.lock()) s->arrive(i, from);
  }
};

}  // namespace

GradientSync::GradientSync(std::shared_ptr<ProcessGroup> group, std::vector<torch::Tensor> params, int64_t bucket_bytes,
                           int64_t first_bucket_bytes)
    : b_(std::make_shared<Buckets>()) {
  auto& b = *b_;
  b.group = std::move(group);
  for (auto& p : params)
    if (p.requires_grad()) b.params.push_back(p);
  const size_t n = b.params.size();
  b.copies.resize(n);
  b.expect.assign(n, kParam);
  b.seen.assign(n, 0);
  b.gathered.assign(n, false);
  b.bucket_of.resize(n);
  b.offset_of.resize(n);
  int64_t cap = first_bucket_bytes, bytes = 0, numel = 0;
  for (size_t k = n; k-- > 0;) {  // reverse registration order: the backward's order, roughly
    const auto& p = b.params[k];
    if (b.buckets.empty() || bytes >= cap || p.scalar_type() != b.params[b.buckets.back().params.front()].scalar_type()) {
      if (!b.buckets.empty()) {
        b.buckets.back().flat = torch::zeros({numel}, b.params[b.buckets.back().params.front()].options());
        cap = bucket_bytes;
      }
      b.buckets.emplace_back();
      bytes = numel = 0;
    }
    b.bucket_of[k] = b.buckets.size() - 1;
    b.offset_of[k] = numel;
    b.buckets.back().params.push_back(k);
    numel += p.numel();
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }
  if (!b.buckets.empty())
    b.buckets.back().flat = torch::zeros({numel}, b.params[b.buckets.back().params.front()].options());
  for (size_t k = 0; k < n; ++k)
    torch::autograd::impl::set_post_acc_grad_hooks(b.params[k], std::make_unique<ArriveHook>(b_, k, kParam));
  stats_.buckets = static_cast<int64_t>(b.buckets.size());
}

GradientSync::~GradientSync() {
  for (auto& p : b_->params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  for (auto& c : b_->copies)
    if (c.defined()) torch::autograd::impl::set_post_acc_grad_hooks(c, nullptr);
}

void GradientSync::use_working_copies(const WorkingCopies& copies) {
  auto& b = *b_;
  if (b.bound == &copies) return;
  if (b.bound)
    throw Error("this gradient sync already follows another set of working copies", "GradientSync",
                "make one set of working copies per model (the optimizer keeps it)");
  std::unordered_map<const void*, size_t> index;
  for (size_t k = 0; k < b.params.size(); ++k) index[b.params[k].unsafeGetTensorImpl()] = k;
  for (const auto& e : copies.entries()) {
    auto it = index.find(e.master.unsafeGetTensorImpl());
    if (it == index.end())
      throw Error("a working copy's master weight is not among the parameters this gradient sync averages",
                  "GradientSync", "build the GradientSync from the model whose weights have the copies");
    const size_t k = it->second;
    b.copies[k] = e.copy;
    b.expect[k] = e.master_read ? kParam | kCopy : kCopy;
    torch::autograd::impl::set_post_acc_grad_hooks(e.copy, std::make_unique<ArriveHook>(b_, k, kCopy));
  }
  b.bound = &copies;
}

int64_t GradientSync::bucket_count() const { return static_cast<int64_t>(b_->buckets.size()); }

ProcessGroup& GradientSync::group() const { return *b_->group; }

void GradientSync::prepare(bool communicate) {
  auto& b = *b_;
  b.communicate = communicate;
  if (!communicate) return;
  b.next_launch = 0;
  std::fill(b.seen.begin(), b.seen.end(), 0);
  std::fill(b.gathered.begin(), b.gathered.end(), false);
  for (auto& bucket : b.buckets) {
    bucket.pending = bucket.params.size();
    bucket.work.reset();
  }
}

void GradientSync::finish() {
  auto& b = *b_;
  if (!b.communicate) return;
  const auto t0 = std::chrono::steady_clock::now();
  // A parameter the backward did not reach (or reached by one of its two sources only) goes in as it is.
  for (size_t i = 0; i < b.params.size(); ++i)
    if (!b.gathered[i]) b.gather(i);
  b.launch_ready();
  torch::NoGradGuard ng;
  for (auto& bucket : b.buckets) {
    bucket.work->wait();
    bucket.work.reset();
    stats_.bytes += bucket.flat.numel() * static_cast<int64_t>(bucket.flat.element_size());
  }
  for (size_t i = 0; i < b.params.size(); ++i) {
    auto& p = b.params[i];
    auto avg = b.slot(i).view_as(p);
    if (p.grad().defined() && !p.grad().is_sparse()) p.mutable_grad().copy_(avg);
    else p.mutable_grad() = avg.clone();
    if (b.copies[i].defined()) b.copies[i].mutable_grad() = torch::Tensor();  // now in the master's, averaged
  }
  b.communicate = false;
  stats_.steps += 1;
  stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace prism
