#include "workloads/fno/memory.hpp"

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>

namespace scaffold::fno {
// A named namespace, not an anonymous one: MemoryTracker::Impl holds one, and GCC warns about a
// member of anonymous-namespace type when this file is compiled in a unity batch.
namespace memory_detail {

class Reporter final : public c10::MemoryReportingInfoBase {
 public:
  explicit Reporter(c10::Device device) : device_(device) {}
  // LibTorch 2.x declares the totals size_t, 1.13 int64_t: both overloads are declared, and the
  // one that matches this LibTorch's pure virtual overrides it.
  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, int64_t /*total_allocated*/,
                         int64_t /*total_reserved*/, c10::Device device) {
    add(alloc_size, device);
  }
  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, size_t /*total_allocated*/,
                         size_t /*total_reserved*/, c10::Device device) {
    add(alloc_size, device);
  }
  // No `override` anywhere here, so compilers that warn about a missing one on some but not all
  // overriding members stay quiet about the overload pair above.
  bool memoryProfilingEnabled() const { return true; }

  std::atomic<int64_t> live{0}, peak{0};

 private:
  void add(int64_t bytes, c10::Device device) {
    if (device.type() != device_.type()) return;
    const int64_t now = live.fetch_add(bytes) + bytes;
    int64_t high = peak.load();
    while (now > high && !peak.compare_exchange_weak(high, now)) {
    }
  }
  c10::Device device_;
};

}  // namespace memory_detail

using memory_detail::Reporter;

struct MemoryTracker::Impl {
  explicit Impl(c10::Device device)
      : reporter(std::make_shared<Reporter>(device)),
        guard(c10::DebugInfoKind::PROFILER_STATE, reporter) {}
  std::shared_ptr<Reporter> reporter;
  c10::DebugInfoGuard guard;
};

MemoryTracker::MemoryTracker(c10::Device device) : impl_(std::make_unique<Impl>(device)) {}
MemoryTracker::~MemoryTracker() = default;
int64_t MemoryTracker::live_bytes() const {
  return impl_->reporter->live.load();
}
int64_t MemoryTracker::peak_bytes() const {
  return impl_->reporter->peak.load();
}

MemoryFigures measure_memory(FnoTask& task, const data::Batch& host_batch, c10::Device device) {
  MemoryFigures f;
  int64_t param_bytes = 0, buffer_bytes = 0;
  for (const at::Tensor& p : task.module().parameters())
    param_bytes += p.numel() * p.element_size();
  for (const at::Tensor& b : task.module().buffers()) buffer_bytes += b.numel() * b.element_size();
  // Between steps Adam holds, per parameter, its gradient and two moments.
  f.persistent_bytes = 4 * param_bytes + buffer_bytes;
  data::Batch batch;
  batch.ids = host_batch.ids;
  int64_t input_bytes = 0;
  for (const at::Tensor& t : host_batch.fields) {
    batch.fields.push_back(t.to(device));
    input_bytes += t.numel() * t.element_size();
  }
  task.module().train();
  train::TrainForward out;
  {
    MemoryTracker tracker(device);
    out = task.train_forward(batch);
    f.peak_forward_bytes =
        f.persistent_bytes + input_bytes + std::max<int64_t>(tracker.peak_bytes(), 0);
    f.activation_bytes = std::max<int64_t>(tracker.live_bytes(), 0);
    // `out` outlives the tracker: its frees are then not reported to it.
  }
  task.after_step();
  return f;
}

}  // namespace scaffold::fno
