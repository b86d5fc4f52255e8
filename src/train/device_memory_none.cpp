// Build without CUDA libraries: no accelerator to ask about memory or identity. A cuda device here
// is a ROCm LibTorch's HIP GPU (docs/deploy.md, "AMD GPUs"): it is made current through
// LibTorch's device-neutral guard interface, which needs no vendor header.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "train/device_memory.hpp"

namespace scaffold::train {

int64_t device_peak_allocated_bytes(const c10::Device&) {
  return -1;
}
int64_t device_total_memory_bytes(const c10::Device&) {
  return -1;
}
std::string device_model_name(const c10::Device&) {
  return {};
}
std::string device_bus_id(const c10::Device&) {
  return {};
}
void set_current_device(const c10::Device& device) {
  if (device.is_cuda() && device.has_index())
    c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

}  // namespace scaffold::train
