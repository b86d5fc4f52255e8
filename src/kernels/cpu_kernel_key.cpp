#include "kernels/cpu_kernel_key.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace scaffold::kernels {

bool cpu_kernel_chosen(const char* key, const std::string& value, const char* name,
                       const c10::Device& device) {
  if (value == name && !device.is_cpu())
    throw core::Error(
        fmt::format("{}: {} runs on the CPU, this run trains on {}; use auto or libtorch", key,
                    name, device.str()));
  return value == name || (value == "auto" && device.is_cpu());
}

}  // namespace scaffold::kernels
