// The resolution every workload's "<op>_kernel: auto | <CPU kernel> | libtorch" key shares, for a
// kernel that only runs on the CPU (the fused optimizers, the native GELU): auto takes it on a
// CPU and LibTorch's elsewhere; naming it for a GPU run is a configuration error.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace scaffold::kernels {

// Whether the CPU kernel `name` runs for `value` of the key `key` (auto: on a CPU). `name` off
// the CPU is a core::Error naming the key, the kernel and the run's device.
bool cpu_kernel_chosen(const char* key, const std::string& value, const char* name,
                       const c10::Device& device);

}  // namespace scaffold::kernels
