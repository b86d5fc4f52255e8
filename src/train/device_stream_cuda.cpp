// CUDA build: the step seam on a GPU. Steps are bracketed by CUDA events on the compute stream
// and read once per epoch (ScaFFold's minibatch timing, docs/benchmark.md); batches are copied
// from pinned memory on a copy stream of their own, so the next batch's copy overlaps the current
// step, and the compute stream (not the host) waits for a copy before its batch is used. No call
// here synchronises the host with the device except collect_s().
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <deque>
#include <utility>

#include "core/error.hpp"
#include "train/device_stream.hpp"

namespace scaffold::train {

namespace {

class CudaStepClock : public StepClock {
 public:
  explicit CudaStepClock(c10::Device device) : device_(device) {}
  void start() override {
    marks_.emplace_back(at::cuda::CUDAEvent(cudaEventDefault),
                        at::cuda::CUDAEvent(cudaEventDefault));
    marks_.back().first.record(c10::cuda::getCurrentCUDAStream(device_.index()));
  }
  void stop() override {
    SCAFFOLD_CHECK(!marks_.empty(), "StepClock::stop() before start()");
    marks_.back().second.record(c10::cuda::getCurrentCUDAStream(device_.index()));
  }
  std::vector<double> collect_s() override {
    std::vector<double> out;
    if (marks_.empty()) return out;
    marks_.back().second.synchronize();  // the one wait: the epoch's last step has ended
    out.reserve(marks_.size());
    for (const auto& [begin, end] : marks_)
      out.push_back(static_cast<double>(begin.elapsed_time(end)) * 1e-3);
    marks_.clear();
    return out;
  }

 private:
  c10::Device device_;
  std::vector<std::pair<at::cuda::CUDAEvent, at::cuda::CUDAEvent>>
      marks_;  // (start, stop) per step
};

class CudaDeviceFeeder : public DeviceFeeder {
 public:
  explicit CudaDeviceFeeder(c10::Device device)
      : device_(device),
        copy_stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}

  void prefetch(const data::Batch& host) override {
    Pending p;
    p.batch.ids = host.ids;
    p.batch.fields.reserve(host.fields.size());
    {
      c10::cuda::CUDAStreamGuard on_copy_stream(copy_stream_);
      // From pinned memory the copy is asynchronous; the caching host allocator keeps the pinned
      // block until the copy is done, so the host batch may go at once.
      for (const at::Tensor& f : host.fields)
        p.batch.fields.push_back(f.to(device_, /*non_blocking=*/true));
      p.copied.record(copy_stream_);
    }
    pending_.push_back(std::move(p));
  }

  data::Batch take() override {
    SCAFFOLD_CHECK(!pending_.empty(), "DeviceFeeder::take() before prefetch()");
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
    p.copied.block(compute);  // the compute stream waits for the copy; the host goes on
    // The tensors were allocated on the copy stream: tell the allocator the compute stream uses
    // them, so their memory is not reused before that stream is done with it.
    for (const at::Tensor& f : p.batch.fields)
      if (f.is_cuda()) f.record_stream(compute);
    return std::move(p.batch);
  }

  bool empty() const override { return pending_.empty(); }

 private:
  struct Pending {
    data::Batch batch;
    at::cuda::CUDAEvent copied;  // recorded on the copy stream after the batch's copies
  };
  c10::Device device_;
  c10::cuda::CUDAStream copy_stream_;
  std::deque<Pending> pending_;
};

}  // namespace

std::unique_ptr<StepClock> make_step_clock(const c10::Device& device) {
  if (device.is_cuda()) return std::make_unique<CudaStepClock>(device);
  return make_host_step_clock();
}

std::unique_ptr<DeviceFeeder> make_device_feeder(const c10::Device& device) {
  if (device.is_cuda()) return std::make_unique<CudaDeviceFeeder>(device);
  return make_host_device_feeder(device);
}

}  // namespace scaffold::train
