// Build without CUDA: there is no accelerator allocator to ask.
#include "train/device_memory.hpp"

namespace scaffold::train {

int64_t device_peak_allocated_bytes(const c10::Device&) { return -1; }
std::string device_model_name(const c10::Device&) { return {}; }

}  // namespace scaffold::train
