// CUDA build: the caching allocator's peak of allocated bytes (all pools) on the device, the
// device's name and PCI address, and the current-device switch.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <fmt/format.h>

#include "train/device_memory.hpp"

namespace scaffold::train {

namespace {
c10::DeviceIndex index_of(const c10::Device& device) {
  return device.index() < 0 ? 0 : device.index();
}
}  // namespace

int64_t device_peak_allocated_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return -1;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  return stats.allocated_bytes[0].peak;  // index 0: StatType::AGGREGATE
}

int64_t device_total_memory_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return -1;
  return static_cast<int64_t>(at::cuda::getDeviceProperties(index_of(device))->totalGlobalMem);
}

std::string device_model_name(const c10::Device& device) {
  if (!device.is_cuda()) return {};
  return at::cuda::getDeviceProperties(index_of(device))->name;
}

std::string device_bus_id(const c10::Device& device) {
  if (!device.is_cuda()) return {};
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(index_of(device));
  return fmt::format("{:04x}:{:02x}:{:02x}.0", p->pciDomainID, p->pciBusID, p->pciDeviceID);
}

void set_current_device(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::set_device(index_of(device));
}

}  // namespace scaffold::train
