// Build without CUDA: every device is the CPU, so the step seam is the host one.
#include "core/error.hpp"
#include "train/device_stream.hpp"

namespace scaffold::train {

std::unique_ptr<StepClock> make_step_clock(const c10::Device& device) {
  SCAFFOLD_CHECK(!device.is_cuda(), "a CUDA device in a build without CUDA");
  return make_host_step_clock();
}

std::unique_ptr<DeviceFeeder> make_device_feeder(const c10::Device& device) {
  SCAFFOLD_CHECK(!device.is_cuda(), "a CUDA device in a build without CUDA");
  return make_host_device_feeder(device);
}

}  // namespace scaffold::train
