// Peak memory the framework allocated on an accelerator, and its model name, for the run summary. CMake compiles the
// CUDA version when LibTorch has CUDA and the stub otherwise (a build option, not an #ifdef).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace scaffold::train {

// Peak bytes allocated by LibTorch's caching allocator on `device` since start; -1 on a CPU
// device or in a build without CUDA.
int64_t device_peak_allocated_bytes(const c10::Device& device);

// The accelerator's model name ("NVIDIA H200"), or "" on a CPU device or a build without CUDA.
std::string device_model_name(const c10::Device& device);

}  // namespace scaffold::train
