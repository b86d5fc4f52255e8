// Build without CUDA libraries: the host's step seam. A cuda device here is a ROCm LibTorch's HIP
// GPU (docs/deploy.md, "AMD GPUs"): its steps are timed by the steady clock between device
// synchronisations, and batches are copied by plain (synchronous) copies.
#include <torch/cuda.h>

#include "core/error.hpp"
#include "train/device_stream.hpp"

namespace scaffold::train {

std::unique_ptr<StepClock> make_step_clock(const c10::Device& device) {
  if (!device.is_cuda()) return make_host_step_clock();
  SCAFFOLD_CHECK(torch::cuda::is_available(), "a cuda device, but this LibTorch has no GPU");
  const int64_t index = device.has_index() ? device.index() : -1;
  return make_synchronizing_step_clock([index] { torch::cuda::synchronize(index); });
}

std::unique_ptr<DeviceFeeder> make_device_feeder(const c10::Device& device) {
  return make_host_device_feeder(device);
}

}  // namespace scaffold::train
