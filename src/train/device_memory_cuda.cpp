// CUDA build: the caching allocator's peak of allocated bytes (all pools) on the device.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "train/device_memory.hpp"

namespace scaffold::train {

int64_t device_peak_allocated_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return -1;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.allocated_bytes[0].peak;  // index 0: StatType::AGGREGATE
}

std::string device_model_name(const c10::Device& device) {
  if (!device.is_cuda()) return {};
  return at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->name;
}

}  // namespace scaffold::train
