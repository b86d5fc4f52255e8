// What the run summary and the device choice need to know of an accelerator: the peak memory the
// framework allocated, its model name and PCI bus id, and making it the current device. CMake
// compiles the CUDA version when LibTorch has CUDA and the stub otherwise (a build option, not an
// #ifdef).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace scaffold::train {

// Peak bytes allocated by LibTorch's caching allocator on `device` since start; -1 on a CPU
// device or in a build without CUDA.
int64_t device_peak_allocated_bytes(const c10::Device& device);

// The accelerator's total memory in bytes; -1 on a CPU device or in a build without CUDA.
int64_t device_total_memory_bytes(const c10::Device& device);

// The accelerator's model name ("NVIDIA H200"), or "" on a CPU device or a build without CUDA.
std::string device_model_name(const c10::Device& device);

// The accelerator's PCI address ("0000:41:00.0"): the physical device whatever the masks, so
// ranks can tell whether they share one; "" on a CPU device or a build without CUDA.
std::string device_bus_id(const c10::Device& device);

// Makes `device` the current CUDA device of this process (streams, events and allocations that
// name no device go there); nothing on a CPU device or a build without CUDA.
void set_current_device(const c10::Device& device);

}  // namespace scaffold::train
