#include "prism/ops/allocation_tracker.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace prism::attention {

namespace {

// Data pointer == context, as LibTorch's own CPU allocator does, so raw
// allocations (raw_allocate / raw_deleter) keep working through the wrapper.
class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* inner) : inner_(inner), inner_delete_(inner->raw_deleter()) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr d = inner_->allocate(n);
    void* p = d.get();
    if (!p || !inner_delete_ || d.get_context() != p) return d;  // not a plain pointer: leave it untracked
    d.release_context();
    note_new(p, n);
    return {p, p, &TrackingAllocator::deleter, d.device()};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &TrackingAllocator::deleter; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static TrackingAllocator* instance;
  std::atomic<int64_t> live{0}, peak{0};

 private:
  static void deleter(void* p) {
    auto* self = instance;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      auto it = self->sizes_.find(p);
      if (it != self->sizes_.end()) {
        self->live -= static_cast<int64_t>(it->second);
        self->sizes_.erase(it);
      }
    }
    self->inner_delete_(p);
  }
  void note_new(void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[p] = n;
    const int64_t now = live += static_cast<int64_t>(n);
    if (now > peak) peak = now;
  }

  c10::Allocator* inner_;
  c10::DeleterFnPtr inner_delete_;
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
};

TrackingAllocator* TrackingAllocator::instance = nullptr;
std::once_flag install_once;

}  // namespace

void CpuAllocationTracker::install() {
  std::call_once(install_once, [] {
    // Never destroyed: tensors freed at exit still call its deleter.
    TrackingAllocator::instance = new TrackingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(TrackingAllocator::instance, /*priority=*/255);
  });
}

bool CpuAllocationTracker::installed() { return TrackingAllocator::instance != nullptr; }
int64_t CpuAllocationTracker::live_bytes() { return installed() ? TrackingAllocator::instance->live.load() : 0; }
int64_t CpuAllocationTracker::peak_bytes() { return installed() ? TrackingAllocator::instance->peak.load() : 0; }
void CpuAllocationTracker::reset_peak() {
  if (installed()) TrackingAllocator::instance->peak = TrackingAllocator::instance->live.load();
}

PeakAllocationScope::PeakAllocationScope() {
  CpuAllocationTracker::reset_peak();
  base_ = CpuAllocationTracker::live_bytes();
}

int64_t PeakAllocationScope::extra_bytes() const {
  return std::max<int64_t>(0, CpuAllocationTracker::peak_bytes() - base_);
}

}  // namespace prism::attention
